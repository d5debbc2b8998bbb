"""The stranded-GPU measure (table-driven from its definition), its vectorised model (equal
to the definition by hypothesis) and the fragmentation-aware plugin built on it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import FakeHandle
from vgpu import builders
from vgpu.config import Config
from vgpu.devices import Usage
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.nodeinfo import NodeInfo, parse_node
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.placement import shares, stranding, stranding_tables
from vgpu_scheduler.placement.shapes import Shape
from vgpu_scheduler.placement.stranding import Workload
from vgpu_scheduler.plugins.gpu import fragmentation_aware
from vgpu_simulate.baselines import fgd
from vgpu_simulate.baselines.fragmentation import fgd_score_from_delta

HALF = Shape(4000, 500, 1, memory_mib=8000)
WHOLE = Shape(8000, 1000, 1, memory_mib=16000)
T4_HALF = Shape(4000, 500, 1, ("T4",), memory_mib=8000)
LOAD = Workload(((HALF, 0.5), (WHOLE, 0.5)), cpu_per_milli=8.0, memory_per_milli=16.0)


@pytest.mark.parametrize(("left", "milli", "gpus", "expected"), [
    ((1000, 1000), 500, 1, 4),  # two halves per idle GPU
    ((700, 1000), 500, 1, 3),  # the 200 left on GPU 0 holds none
    ((700, 1000), 1000, 1, 1),
    ((1000, 1000, 1000, 600), 1000, 2, 1),  # three whole GPUs: one pair
    ((1000,) * 8, 1000, 8, 1),
    ((1000,) * 7, 1000, 8, 0),
    ((0, 0), 230, 1, 0),
])
def test_instances(left: tuple[int, ...], milli: int, gpus: int, expected: int) -> None:
    assert stranding.instances(left, milli, gpus) == expected


@pytest.mark.parametrize(("left", "cpu", "memory", "model", "expected"), [
    # Idle node, plenty of CPU and memory: 4 halves or 2 wholes, each half the workload.
    ((1000, 1000), 32000, 64000, "G2", (2000.0, 2000.0)),
    # CPU for one whole or two halves; the mix is CPU-bound too (8000 / 8 per milli).
    ((1000, 1000), 8000, 64000, "G2", (1000.0, 1000.0)),
    # Memory for one whole or two halves (16000 / 16 per milli).
    ((1000, 1000), 32000, 16000, "G2", (1000.0, 1000.0)),
    # A used GPU: three halves (0.5 × 1500) or one whole (0.5 × 1000).
    ((700, 1000), 32000, 64000, "G2", (1250.0, 1700.0)),
    # No CPU left: nothing can come, every idle GPU is stranded.
    ((1000, 1000), 0, 64000, "G2", (0.0, 0.0)),
    # A full node strands nothing.
    ((0, 0), 32000, 64000, "G2", (0.0, 0.0)),
])
def test_fill_mix_and_stranded(left: tuple[int, ...], cpu: int, memory: int, model: str,
                               expected: tuple[float, float]) -> None:
    fill, mix = expected
    assert stranding.fill(left, cpu, memory, model, LOAD) == pytest.approx(fill)
    assert stranding.mix(sum(left), cpu, memory, LOAD) == pytest.approx(mix)
    assert stranding.stranded(left, cpu, memory, model, LOAD) == pytest.approx(
        sum(left) - fill - mix)


def test_a_shape_that_excludes_the_model_serves_nothing() -> None:
    load = Workload(((T4_HALF, 1.0),), 8.0, 16.0)
    assert stranding.fill((1000,), 32000, 64000, "G2", load) == 0.0
    assert stranding.fill((1000,), 32000, 64000, "T4", load) == 1000.0


def test_workload_keeps_every_shape_with_its_median_memory_and_the_gpu_ratios() -> None:
    shapes = ([Shape(4000, 500, 1, memory_mib=m) for m in (1000, 3000, 9000)]
              + [Shape(8000, 1000, 1, memory_mib=4000), Shape(2000, 0, 0, memory_mib=500)])
    load = stranding.workload(shapes)
    assert [(s.milli_cpu, s.memory_mib, round(p, 2)) for s, p in load.shapes] == [
        (4000, 3000, 0.6), (8000, 4000, 0.2), (2000, 500, 0.2)]
    assert [s.milli_gpu for s, _ in load.gpu_shapes] == [500, 1000]
    assert load.cpu_per_milli == pytest.approx(20000 / 2500)  # GPU tasks only
    assert load.memory_per_milli == pytest.approx(17000 / 2500)
    assert stranding.workload([]) == Workload((), 0.0, 0.0)


@pytest.mark.parametrize(("left", "shape", "position", "after"), [
    ((1000, 700), HALF, 1, (1000, 200)),
    ((1000, 700), HALF, None, None),  # a share needs a GPU
    ((1000, 300), HALF, 1, None),
    ((1000, 0, 1000), Shape(1, 1000, 2), None, (0, 0, 0)),
    ((1000, 700, 1000), WHOLE, None, (0, 700, 1000)),  # the fullest that fit, then position
    ((500,), Shape(1000, 0, 0), None, (500,)),
])
def test_after_placement(left: tuple[int, ...], shape: Shape, position: int | None,
                         after: tuple[int, ...] | None) -> None:
    assert stranding.after_placement(left, shape, position) == after


def test_delta_sees_cpu_that_idle_gpus_need() -> None:
    # Two idle GPUs and CPU for exactly two whole tasks: a CPU-only task of 4000 leaves
    # CPU for one (FGD's next-task test still passes) and strands the other GPU.
    load = Workload(((WHOLE, 1.0),), 8.0, 0.0)
    grown = stranding.delta((1000, 1000), 16000, 64000, "G2", Shape(4000, 0, 0), load=load)
    assert grown == pytest.approx(1000.0 + 500.0)  # fill loses a task; the mix loses 500
    taken = stranding.delta((0, 0), 32000, 64000, "G2", Shape(4000, 0, 0), load=load)
    assert taken == 0.0
    assert stranding.delta((0, 0), 3000, 64000, "G2", Shape(4000, 0, 0), load=load) is None


def test_scores_truncate_like_fgd() -> None:
    changes = np.asarray([-2000.0, -130.0, 0.0, 1.0, 2000.0, 1e6])
    assert stranding.scores_from_deltas(changes).tolist() == [
        fgd_score_from_delta(c) for c in changes.tolist()] == [88, 53, 50, 49, 11, 0]


# -- the vectorised model equals the definition ---------------------------------------------

free_share = st.sampled_from([0, 50, 230, 460, 500, 540, 770, 1000, 1000, 1000])
node_st = st.tuples(st.lists(free_share, min_size=1, max_size=8),
                    st.one_of(st.just(64000), st.integers(-1000, 64000)),
                    st.one_of(st.just(200000), st.integers(-100, 200000)),
                    st.sampled_from(["G2", "T4"]))
shape_st = st.builds(Shape, st.sampled_from([100, 1000, 4000, 12000, 40000]),
                     st.sampled_from([0, 230, 500, 1000, 1000]),
                     st.sampled_from([0, 1, 1, 2, 2, 4]),
                     st.sampled_from([(), (), ("T4",)]),
                     st.sampled_from([0, 1000, 16000, 60000]))
#: Shared-GPU pods, the case with a GPU choice, drawn more often.
share_st = st.builds(Shape, st.sampled_from([100, 4000]), st.sampled_from([230, 460, 500, 770]),
                     st.just(1), memory_mib=st.sampled_from([0, 1000]))


def _valid(shape: Shape) -> Shape:
    if (shape.milli_gpu > 0) != (shape.gpus > 0) or (shape.gpus > 1 and shape.milli_gpu < 1000):
        return Shape(shape.milli_cpu, 0, 0, memory_mib=shape.memory_mib)
    return shape


def _reference(node: tuple[list[int], int, int, str], shape: Shape, load: Workload) -> float:
    left, cpu, memory, model = node
    positions: Sequence[int | None] = (range(len(left)) if shape.gpus == 1
                                       and 0 < shape.milli_gpu < 1000 else [None])
    found = [stranding.delta(left, cpu, memory, model, shape, load=load, position=p)
             for p in positions]
    values = [f for f in found if f is not None]
    return min(values) if values else math.inf


@settings(max_examples=300, deadline=None)
@given(nodes=st.lists(node_st, min_size=1, max_size=6),
       shapes=st.lists(st.one_of(shape_st, share_st), min_size=1, max_size=10),
       pod=st.one_of(shape_st, share_st))
def test_the_vectorised_model_equals_the_definition(
        nodes: list[tuple[list[int], int, int, str]], shapes: list[Shape], pod: Shape) -> None:
    load = stranding.workload([_valid(s) for s in shapes])
    pod = _valid(pod)
    states: list[tuple[str, tuple[int, ...]]] = []
    model = stranding_tables.StrandingModel(load, states)
    # States arrive one at a time and widen the tables as wider nodes appear.
    for left, _, _, name in nodes:
        states.append((name, tuple(sorted(left))))
        model.deltas(np.asarray([len(states) - 1]), np.asarray([64000]),
                     np.asarray([200000]), pod)
    got = model.deltas(np.arange(len(nodes)), np.asarray([n[1] for n in nodes]),
                       np.asarray([n[2] for n in nodes]), pod)
    expected = [_reference(n, pod, load) for n in nodes]
    assert got.tolist() == pytest.approx(expected)


# -- the plugin ----------------------------------------------------------------------------

def _node(name: str, gpus: int, used: Sequence[tuple[int, int]] = (), *, cpu: str = "32",
          requested_cpu: int = 0) -> NodeInfo:
    static = parse_node(builders.node(name, builders.devices(name, gpus, split=20), cpu=cpu,
                                   memory="256Gi", heartbeat=1.0))
    usage = {static.devices[i].uuid: Usage(0, cores, tasks)
             for i, (cores, tasks) in enumerate(used)}
    return NodeInfo(static, 1.0, requested_cpu=requested_cpu, gpu_usage=usage)


def _pod(cpu: str, *, gpus: int | None = 1, percent: int = 100) -> object:
    return parse(builders.pod("p", [builders.container(gpus=gpus, cores=percent if gpus else None,
                                                 percent=percent if gpus else None,
                                                 cpu=cpu, memory="1Gi")]), Config())


def _order(plugin: fragmentation_aware.FragmentationAware, pod: object,
           snapshot: Snapshot) -> list[float]:
    result, _ = plugin.pre_filter(None, pod, snapshot)  # type: ignore[arg-type]
    assert result is not None and result.scores is not None
    return result.scores.tolist()


WORKLOAD = [Shape(8000, 1000, 1, memory_mib=1024)] * 6 + [Shape(4000, 500, 1,
                                                                memory_mib=1024)] * 4


def test_a_cpu_only_pod_goes_where_no_idle_gpu_needs_the_cpu() -> None:
    plugin = fragmentation_aware.FragmentationAware(FakeHandle(), workload=WORKLOAD)
    snapshot = Snapshot(plugin.columns())
    # First in order: two idle GPUs with CPU for exactly two whole-GPU tasks.
    snapshot.set(_node("tight", 2, cpu="16"))
    snapshot.set(_node("busy", 2, [(100, 1), (100, 1)], cpu="64"))  # GPUs all taken
    order = _order(plugin, _pod("4", gpus=None), snapshot)
    assert order[1] > order[0]
    # FGD's next-task measure sees no difference (one whole task still fits): a tie.
    plain = fgd.FGD(FakeHandle(), workload=WORKLOAD)
    tied = Snapshot(plain.columns())
    for info in snapshot:
        tied.set(info)
    result, _ = plain.pre_filter(None, _pod("4", gpus=None), tied)  # type: ignore[arg-type]
    assert result is not None and result.scores is not None
    assert result.scores[0] == result.scores[1]


def test_order_equals_the_per_node_score_and_the_cache_follows_changes() -> None:
    plugin = fragmentation_aware.FragmentationAware(FakeHandle(), workload=WORKLOAD)
    snapshot = Snapshot(plugin.columns())
    for info in (_node("a", 2), _node("b", 2, [(50, 1)]), _node("c", 4, [(50, 1), (100, 1)]),
                 _node("d", 2, [(30, 1)], requested_cpu=30000)):
        snapshot.set(info)
    half = _pod("4", percent=50)
    first = _order(plugin, half, snapshot)
    assert first == [plugin.score(None, half, info) or -math.inf  # type: ignore[arg-type]
                     for info in snapshot]
    assert int(np.argmax(first)) == 1  # the half-used GPU takes the half
    assert first[3] == -math.inf  # no CPU left on d
    # A node changes: a cached plugin must answer as a fresh one does.
    snapshot.set(_node("b", 2, [(100, 1)]))
    snapshot.set(_node("d", 2, [(30, 1)]))
    fresh = fragmentation_aware.FragmentationAware(FakeHandle(), workload=WORKLOAD)
    again = Snapshot(fresh.columns())
    for info in snapshot:
        again.set(info)
    assert _order(plugin, half, snapshot) == _order(fresh, half, again)
    assert _order(plugin, _pod("8"), snapshot) == _order(fresh, _pod("8"), again)


def test_a_share_goes_to_the_gpu_that_leaves_most_serviceable() -> None:
    plugin = fragmentation_aware.FragmentationAware(FakeHandle(), workload=WORKLOAD)
    info = _node("n", 3, [(50, 1), (70, 1)])  # free: 500, 300, 1000
    pod = _pod("1", percent=30)
    plugin.pre_filter(None, pod, Snapshot(plugin.columns()))  # type: ignore[arg-type]
    free = shares.free_milli(info)
    cands = [GpuCandidate(i, d, u, 0, 30, d.memory_mib) for i, (d, u) in enumerate(
        zip(info.devices, info.usages, strict=True)) if free[i] >= 300]
    assert plugin.rank_gpus(info, cands)[0].position == 1  # fills the 300


def test_without_a_trace_the_workload_is_learned_from_pods() -> None:
    handle = FakeHandle()
    plugin = fragmentation_aware.FragmentationAware(handle)
    assert plugin.load.shapes == ()
    for i in range(shares.RELEARN_EVERY):
        pod = builders.pod(f"p{i}", [builders.container(gpus=1, cores=50, percent=50, cpu="4")])
        for handler in handle.handlers:
            handler(None, pod)
    assert [(s.milli_cpu, s.milli_gpu, p) for s, p in plugin.load.shapes] == [(4000, 500, 1.0)]
    assert plugin.load.cpu_per_milli == pytest.approx(8.0)


def test_tables_start_over_past_the_row_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stranding_tables, "MAX_ROWS", 3)
    load = stranding.workload(WORKLOAD)
    states = [("G2", tuple(sorted(free))) for free in
              ((1000, 1000), (500, 1000), (0, 1000), (300, 700), (1000,) * 4, (0, 0))]
    model = stranding_tables.StrandingModel(load, states)
    cpu = np.full(len(states), 32000)
    memory = np.full(len(states), 65536)
    pod = Shape(4000, 500, 1, memory_mib=1024)
    one_by_one = [model.deltas(np.asarray([i]), cpu[:1], memory[:1], pod)[0]
                  for i in (5, 0, 3, 1, 4, 2, 0)]
    assert model.rows <= 3
    every = stranding_tables.StrandingModel(load, states).deltas(np.arange(len(states)), cpu,
                                                          memory, pod)
    assert one_by_one == [every[i] for i in (5, 0, 3, 1, 4, 2, 0)]
    assert model.deltas(np.arange(len(states)), cpu, memory, pod).tolist() == every.tolist()
