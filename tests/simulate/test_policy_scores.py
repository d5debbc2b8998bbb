"""The policies' pure score functions, table-driven (the paper artifact's arithmetic)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tests.scheduler.helpers import FakeHandle
from vgpu import builders
from vgpu.config import Config
from vgpu.devices import Usage
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.nodeinfo import NodeInfo, parse_node
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.placement import shares
from vgpu_scheduler.placement.shapes import Shape
from vgpu_scheduler.plugins.gpu import fragmentation_aware
from vgpu_simulate.baselines import bestfit, dotprod, fgd, gpu_clustering, gpu_packing
from vgpu_simulate.baselines.fragmentation import FragModel, fgd_score_from_delta


@pytest.mark.parametrize(("free_cpu", "free_gpu", "cpu", "gpu", "expected"), [
    (96000, 8000, 0, 0, 12),  # an empty 8-GPU, 96-core node: 1 - (0.375 + 0.5)
    (96000, 8000, 96000, 8000, 100),  # the pod fills it
    (12000, 1000, 12000, 1000, 100),
    (64000, 2000, 6000, 460, 67),
    (128000, 0, 1000, 0, 50),
])
def test_bestfit_score(free_cpu: int, free_gpu: int, cpu: int, gpu: int, expected: int) -> None:
    assert bestfit.score(free_cpu, free_gpu, cpu, gpu) == expected
    vector = bestfit.scores(np.array([free_cpu]), np.array([free_gpu]), cpu, gpu)
    assert vector[0] == expected


def node(gpus: int, used: list[tuple[int, int]], cpu: str = "32", requested_cpu: int = 0
         ) -> NodeInfo:
    static = parse_node(builders.node("n", builders.devices("n", gpus, split=20), cpu=cpu,
                                   heartbeat=1.0))
    usage = {static.devices[i].uuid: Usage(0, cores, tasks) for i, (cores, tasks) in
             enumerate(used)}
    return NodeInfo(static, 1.0, requested_cpu=requested_cpu, gpu_usage=usage)


@pytest.mark.parametrize(("used", "free"), [
    ([], (1000, 1000)),
    ([(46, 1)], (540, 1000)),
    ([(100, 1)], (0, 1000)),  # exclusive
    ([(0, 20)], (0, 1000)),  # every slot taken
])
def test_free_share_per_gpu(used: list[tuple[int, int]], free: tuple[int, ...]) -> None:
    assert shares.free_milli(node(2, used)) == free


@pytest.mark.parametrize(("container", "shape"), [
    (builders.container(gpus=1, cores=46, percent=46, cpu="6"), Shape(6000, 460, 1)),
    (builders.container(gpus=8, cores=100, cpu="64"), Shape(64000, 1000, 8)),
    (builders.container(gpus=None, cpu="4"), Shape(4000, 0, 0)),
    (builders.container(gpus=None), Shape(shares.DEFAULT_MILLI_CPU, 0, 0)),
])
def test_pod_shape(container: dict[str, object], shape: Shape) -> None:
    assert shares.pod_shape(parse(builders.pod("p", [container]), Config())) == shape


WORKLOAD = [Shape(4000, 500, 1)] * 6 + [Shape(8000, 1000, 1)] * 4


@pytest.mark.parametrize("cls", [fgd.FGD, fragmentation_aware.FragmentationAware])
def test_order_equals_the_per_node_score(cls: type[fgd.FGD]) -> None:
    plugin = cls(FakeHandle(), workload=WORKLOAD)
    nodes = [node(2, []), node(2, [(50, 1)]), node(2, [(50, 1), (100, 1)]),
             node(2, [(30, 1)], requested_cpu=30000)]
    snapshot = Snapshot(plugin.columns())
    for i, info in enumerate(nodes):
        static = parse_node(builders.node(f"n{i}", info.devices, cpu="32", heartbeat=1.0))
        snapshot.set(NodeInfo(static, 1.0, requested_cpu=info.requested_cpu,
                              gpu_usage=info.gpu_usage))
    pod = parse(builders.pod("p", [builders.container(gpus=1, cores=50, percent=50, cpu="4")]),
                Config())
    result, _ = plugin.pre_filter(None, pod, snapshot)  # type: ignore[arg-type]
    assert result is not None and result.scores is not None
    expected = [plugin.score(None, pod, info) for info in snapshot]  # type: ignore[arg-type]
    assert [v if v != -np.inf else 0.0 for v in result.scores.tolist()] == expected
    # The half-used GPU is the best place for a half (node 3 lacks the CPU; filtered).
    assert int(np.argmax(result.scores[:3])) == 1


def test_fgd_gpu_choice_and_ours_differ_only_on_ties() -> None:
    model = FragModel(((Shape(4000, 500, 1), 0.6), (Shape(8000, 1000, 1), 0.4)))
    info = node(3, [(50, 1), (70, 1)])  # free: 500, 300, 1000
    cands_free = shares.free_milli(info)
    assert cands_free == (500, 300, 1000)
    for cls in (fgd.FGD, fragmentation_aware.FragmentationAware):
        plugin = cls(FakeHandle(), workload=[s for s, _ in model.typical])
        pod = parse(builders.pod("p", [builders.container(gpus=1, cores=30, percent=30, cpu="1")]),
                    Config())
        plugin.pre_filter(None, pod, Snapshot(plugin.columns()))  # type: ignore[arg-type]
        cands = [GpuCandidate(i, d, u, 0, 30, d.memory_mib) for i, (d, u) in enumerate(
            zip(info.devices, info.usages, strict=True)) if cands_free[i] >= 300]
        ranked = plugin.rank_gpus(info, cands)
        # Filling the 300 left on GPU 1 fragments least under both.
        assert ranked[0].position == 1


def test_fgd_score_matches_the_artifacts_truncation() -> None:
    assert [fgd_score_from_delta(d) for d in (-2000.0, 0.0, 2000.0)] == [88, 50, 11]


@pytest.mark.parametrize(("free", "milli", "gpus", "expected"), [
    ((1000, 1000), 500, 1, 31),  # idle node: 33 - 2 GPUs
    ((1000,) * 8, 1000, 1, 25),  # idle 8-GPU node: 33 - 8
    ((500, 1000), 500, 1, 95),  # shares a used GPU with 50 % free: 100 - 50/10
    ((300, 1000), 500, 1, 49),  # needs an idle GPU of a used node: 50 - 1
    ((300, 1000, 1000), 1000, 2, 48),
    ((300, 200), 500, 1, None),  # does not fit
    ((300, 1000), 0, 0, 0),  # no GPU asked: 0 everywhere
])
def test_packing_score(free: tuple[int, ...], milli: int, gpus: int,
                       expected: int | None) -> None:
    assert gpu_packing.score(free, milli, gpus) == expected


@pytest.mark.parametrize(("free_cpu", "free_gpu", "cpu", "gpu", "expected"), [
    (128000, 8000, 128000, 8000, 0),
    (0, 0, 6000, 460, 100),
    (96000, 8000, 12000, 1000, 90),
])
def test_dotprod_score(free_cpu: int, free_gpu: int, cpu: int, gpu: int, expected: int) -> None:
    assert dotprod.score(free_cpu, free_gpu, cpu, gpu) == expected
    assert dotprod.scores(np.array([free_cpu]), np.array([free_gpu]), cpu, gpu)[0] == expected


@pytest.mark.parametrize(("kinds", "pod_kind", "free", "expected"), [
    ({}, None, 0, 0),  # a pod without GPUs scores 0 everywhere
    ({}, "share", 8000, 25),  # an idle 8-GPU node: tier 1, nothing used
    ({"share": 2}, "share", 7000, 78),  # only shares: 75 + 25 × 1000 / 8000 (truncated)
    ({"share": 1, "1-gpu": 1}, "share", 4000, 62),  # shares among others: 50 + 12
    ({"1-gpu": 1}, "share", 1000, 21),  # other kinds only: 0 + 21
    ({"share": 0}, "1-gpu", 2000, 43),  # a count that dropped to 0 is no kind: tier 1
    ({}, "8-gpu", 16000, -25 + 25),  # a 16-GPU node: Go truncates −25 toward zero
])
def test_clustering_score(kinds: dict[str, int], pod_kind: str | None, free: int,
                          expected: int) -> None:
    assert gpu_clustering.score(Counter(kinds), pod_kind, free) == expected


def test_clustering_keeps_kinds_from_pod_events_and_orders_nodes_by_them() -> None:
    handle = FakeHandle()
    plugin = gpu_clustering.GpuClustering(handle)
    snapshot = Snapshot(plugin.columns())
    for i, used in enumerate(([(50, 1)], [(100, 1)], [])):
        static = parse_node(builders.node(f"n{i}", builders.devices(f"n{i}", 2), cpu="32",
                                       heartbeat=1.0))
        usage = {static.devices[j].uuid: Usage(0, c, t) for j, (c, t) in enumerate(used)}
        snapshot.set(NodeInfo(static, 1.0, gpu_usage=usage))

    def bound(name: str, node_name: str, container: dict[str, object]) -> dict[str, object]:
        pod = builders.pod(name, [container])
        pod["spec"]["nodeName"] = node_name
        return pod

    half = bound("h", "n0", builders.container(gpus=1, cores=50, percent=50))
    whole = bound("w", "n1", builders.container(gpus=1))
    for handler in handle.handlers:
        handler(None, half)
        handler(None, whole)
        handler(None, bound("c", "n2", builders.container(gpus=None)))  # no GPU: no kind
    share = parse(builders.pod("p", [builders.container(gpus=1, cores=30, percent=30)]), Config())
    result, _ = plugin.pre_filter(None, share, snapshot)  # type: ignore[arg-type]
    assert result is not None and result.scores is not None
    assert result.scores.tolist() == [plugin.score(None, share, info)  # type: ignore[arg-type]
                                         for info in snapshot] == [95.0, 21.0, 43.0]
    for handler in handle.handlers:  # the share pod leaves: n0 has no kind again
        handler(half, None)
    assert plugin.kinds("n0") == Counter({"share": 0})
    # 2-GPU nodes are never full by the 8-GPU yardstick: 25 × 6500 / 8000 = 20.
    assert plugin.score(None, share, snapshot.nodes[0]) == 25.0 + 20  # type: ignore[arg-type]
