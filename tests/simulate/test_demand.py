"""The workload against the cluster: each shape's density per model and the CPU a GPU needs
(table-driven from the definitions), the stranding measure weighed by them (the vectorised
model still equals the definition), and the plugin learning constraints from pods."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import FakeHandle
from tests.simulate.test_stranding import _reference, _valid, node_st, shape_st, share_st
from vgpu import builders
from vgpu.config import Config
from vgpu_scheduler.framework.nodeinfo import NodeInfo, parse_node
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.placement import demand, shares, stranding, stranding_tables
from vgpu_scheduler.placement.shapes import Shape
from vgpu_scheduler.plugins.gpu import fragmentation_aware

ANY = Shape(8000, 1000, 1)
HALF = Shape(4000, 500, 1)
ON_T4 = Shape(8000, 1000, 1, ("T4",))
NOT_T4 = Shape(8000, 1000, 1, excluded=("T4",))
BIG = 1 << 30  # CPU or memory no task here exceeds


def gpus(**by_model: int) -> dict[demand.NodeKind, int]:
    """One-GPU nodes with plenty of CPU and memory: ``gpus(G2=90, T4=10)``."""
    return {demand.NodeKind(m, 1, BIG, BIG): n for m, n in by_model.items()}


def _dens(shapes: list[tuple[Shape, float]], kinds: dict[demand.NodeKind, int]
          ) -> dict[str, list[float]]:
    return {m: [round(x, 3) for x in row]
            for m, row in demand.densities(shapes, kinds).items()}


EIGHT = demand.NodeKind("G2", 8, 96000, 393216)
EIGHT_BIG = demand.NodeKind("G3", 8, 128000, 786432)
TWO = demand.NodeKind("T4", 2, 104000, 524288)


@pytest.mark.parametrize(("shapes", "kinds", "expected"), [
    # Every node holds every shape: density 1 everywhere.
    ([(ANY, 0.5), (HALF, 0.5)], gpus(G2=90, T4=10), {"G2": [1.0, 1.0], "T4": [1.0, 1.0]}),
    # A tenth of the GPUs are T4: a task pinned there is ten times as dense on each.
    ([(ANY, 0.8), (ON_T4, 0.2)], gpus(G2=90, T4=10),
     {"G2": [1.0, 0.0], "T4": [1.0, 10.0]}),
    # nouse-gputype from the other side: half the GPUs are left to the refusing shape.
    ([(ANY, 0.6), (NOT_T4, 0.4)], gpus(G2=50, T4=50),
     {"G2": [1.0, 2.0], "T4": [1.0, 0.0]}),
    # Several models: the GPUs of all of them count (100 / (60 + 25)).
    ([(Shape(4000, 500, 1, ("G2", "V100")), 1.0)], gpus(G2=60, T4=15, V100=25),
     {"G2": [1.176], "T4": [0.0], "V100": [1.176]}),
    # A shape no GPU of the cluster takes is no demand anywhere; a model without nodes
    # gets no row.
    ([(ANY, 0.5), (Shape(1, 1000, 1, ("A100",)), 0.5)], gpus(G2=10, A100=0),
     {"G2": [1.0, 0.0]}),
    # Not only models: eight GPUs fit only the 8-GPU nodes (80 of 100 GPUs), 120 CPUs only
    # the big ones (16 of 100); the model row is the same, the node decides the fit.
    ([(Shape(88000, 1000, 8), 0.5), (Shape(120000, 1000, 8), 0.3), (ANY, 0.2)],
     {EIGHT: 8, EIGHT_BIG: 2, TWO: 10},
     {"G2": [1.25, 6.25, 1.0], "G3": [1.25, 6.25, 1.0], "T4": [1.25, 6.25, 1.0]}),
])
def test_densities(shapes: list[tuple[Shape, float]], kinds: dict[demand.NodeKind, int],
                   expected: dict[str, list[float]]) -> None:
    assert _dens(shapes, kinds) == expected


models_st = st.sampled_from([(), ("T4",), ("G2",), ("T4", "G2"), ("V100",)])
kind_st = st.builds(demand.NodeKind, st.sampled_from(["G2", "T4", "V100", "A10"]),
                    st.sampled_from([0, 1, 2, 8]), st.sampled_from([8000, 96000]),
                    st.sampled_from([65536, 393216]))


@given(shapes=st.lists(st.builds(Shape, st.sampled_from([1000, 40000]),
                                 st.sampled_from([500, 1000]), st.sampled_from([1, 2, 8]),
                                 models_st, st.sampled_from([0, 100000])),
                       min_size=1, max_size=6),
       kinds=st.dictionaries(kind_st, st.integers(0, 20), min_size=1))
def test_a_shape_weighs_as_much_over_the_cluster_as_without_constraints(
        shapes: list[Shape], kinds: dict[demand.NodeKind, int]) -> None:
    found = demand.densities([(s, 1.0) for s in shapes], kinds)
    total = sum(k.gpus * n for k, n in kinds.items())
    assert bool(found) == (total > 0)
    for j, s in enumerate(shapes):
        # Over the GPUs that could hold it, a task's density averages to 1: every task is
        # somewhere (or, if no node holds it, nowhere).
        spread = sum(found[k.model][j] * k.gpus * n / total
                     for k, n in kinds.items() if k.gpus and n and k.holds(s))
        held = any(k.gpus and n and k.holds(s) for k, n in kinds.items())
        assert spread == pytest.approx(1.0 if held else 0.0)


@pytest.mark.parametrize(("cpu_only", "expected"), [
    # 100 GPUs × 1000 milli, 1,500,000 milli-CPU: 15 per milli-GPU; GPU tasks need 8.
    ([], 0.0),
    ([Shape(7 * 1000 * 2, 0, 0)] * 50, 0.0),  # 7 per milli-GPU: within the spare 7
    ([Shape(10 * 1000 * 2, 0, 0)] * 50, 0.3),  # 10: 3 of them beyond the spare
    ([Shape(14 * 1000 * 2, 0, 0)] * 50, 0.5),  # 14: 7 beyond it
])
def test_cpu_only_tasks_beyond_the_spare_cpu_contest_the_gpu_tasks_cpu(
        cpu_only: list[Shape], expected: float) -> None:
    gpu_tasks = [Shape(8000, 1000, 1, memory_mib=1000)] * 100
    kinds = {demand.NodeKind("G2", 10, 150000, 2_000_000): 10}
    assert demand.contested(gpu_tasks + cpu_only, kinds) == pytest.approx(expected)
    cpu, memory = demand.per_milli(gpu_tasks + cpu_only, kinds)
    assert cpu == pytest.approx(8.0)  # what a GPU task needs, whatever else arrives
    assert memory == pytest.approx(1.0)  # memory is plentiful: unchanged
    assert demand.per_milli(cpu_only, kinds) == (0.0, 0.0)
    assert demand.contested(cpu_only, kinds) == 0.0  # no GPU task to take CPU from


def test_with_no_spare_cpu_only_tasks_take_all_they_reach() -> None:
    tasks = [Shape(8000, 1000, 1)] * 10 + [Shape(4000, 0, 0)] * 10
    assert demand.contested(tasks, {demand.NodeKind("G2", 1, 6000, BIG): 10}) == 1.0


CPU_ONLY_LOAD = stranding.Workload(
    ((Shape(8000, 1000, 1), 0.5), (Shape(8000, 0, 0), 0.25), (Shape(12000, 0, 0), 0.25)),
    cpu_per_milli=8.0, memory_per_milli=0.0, contested=0.5)


@pytest.mark.parametrize(("cpu", "expected"), [
    (7999, 7999.0),  # smaller than every CPU-only task: all of it feeds GPUs
    (8000, 8000 - 0.5 * 0.5 * 8000),  # one 8-CPU task fits, half the time, of half the tasks
    (12000, 12000 - 0.5 * (0.5 * 8000 + 0.5 * 12000)),
    (24000, 24000 - 0.5 * (0.5 * 24000 + 0.5 * 24000)),  # whole multiples: half of it
    (-5, 0.0),
])
def test_cpu_for_gpus(cpu: int, expected: float) -> None:
    assert stranding.cpu_for_gpus(cpu, CPU_ONLY_LOAD) == pytest.approx(expected)
    assert CPU_ONLY_LOAD.cpu_only_sizes == ((8000, 0.5), (12000, 0.5))
    uncontested = stranding.Workload(CPU_ONLY_LOAD.shapes, 8.0, 0.0)
    assert stranding.cpu_for_gpus(cpu, uncontested) == max(cpu, 0)


def test_a_gpu_task_takes_the_cpu_cpu_only_tasks_would_take() -> None:
    # Two idle GPUs with 20 CPUs, or with 16: either feeds both at 8 per GPU, a tie while
    # CPU-only tasks fit in the spare. When they take half of what they reach, the 16 CPUs
    # keep 9 for the GPUs (1.1 GPUs) and the 20 keep 13 (1.6): a whole-GPU task saves more
    # GPU from them on the poorer node, taking its CPU before they do.
    load = CPU_ONLY_LOAD
    rich = stranding.delta((1000, 1000), 20000, 0, "G2", Shape(8000, 1000, 1), load=load)
    poor = stranding.delta((1000, 1000), 16000, 0, "G2", Shape(8000, 1000, 1), load=load)
    assert rich == pytest.approx(-250.0) and poor == pytest.approx(-625.0)
    plain = stranding.Workload(load.shapes, 8.0, 0.0)
    assert stranding.delta((1000, 1000), 20000, 0, "G2", Shape(8000, 1000, 1),
                           load=plain) == stranding.delta(
        (1000, 1000), 16000, 0, "G2", Shape(8000, 1000, 1), load=plain)


def test_the_measure_weighs_a_scarce_model_by_its_density() -> None:
    tasks = [ANY] * 8 + [ON_T4] * 2
    plain = stranding.workload(tasks)
    scarce = stranding.workload(tasks, gpus(G2=90, T4=10))
    assert plain.weights("T4") == (1.0, 1.0) and plain.weights("G2") == (1.0, 0.0)
    assert scarce.weights("T4") == (1.0, 10.0) and scarce.weights("G2") == (1.0, 0.0)
    # An idle T4 GPU holds one task of either shape: 0.8 + 0.2 of a GPU by frequencies;
    # weighed by who will ask for it, 0.8 + 10 × 0.2.
    assert stranding.fill((1000,), 32000, 64000, "T4", plain) == pytest.approx(1000.0)
    assert stranding.fill((1000,), 32000, 64000, "T4", scarce) == pytest.approx(2800.0)
    # So a task that runs anywhere strands more on a T4 GPU than on a G2 GPU: by the pinned
    # tasks' share of a GPU without densities (the G2 GPU never served them), ten times
    # that with them.
    for load, gap in ((plain, 0.2 * 1000), (scarce, 10 * 0.2 * 1000)):
        on_t4 = stranding.delta((1000, 1000), 64000, 128000, "T4", ANY, load=load)
        on_g2 = stranding.delta((1000, 1000), 64000, 128000, "G2", ANY, load=load)
        assert on_t4 is not None and on_g2 is not None
        assert on_t4 - on_g2 == pytest.approx(gap)


pinned_st = st.builds(Shape, st.sampled_from([1000, 4000]), st.sampled_from([500, 1000]),
                      st.just(1), st.sampled_from([("T4",), ("G2",), ("T4", "G2")]),
                      st.sampled_from([0, 1000]), st.sampled_from([(), ("V100",)]))


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(node_st, min_size=1, max_size=6),
       shapes=st.lists(st.one_of(shape_st, share_st, pinned_st), min_size=1, max_size=10),
       kinds=st.dictionaries(kind_st, st.integers(1, 20), min_size=1),
       pod=st.one_of(shape_st, share_st))
def test_the_vectorised_model_with_densities_equals_the_definition(
        nodes: list[tuple[list[int], int, int, str]], shapes: list[Shape],
        kinds: dict[demand.NodeKind, int], pod: Shape) -> None:
    load = stranding.workload([_valid(s) for s in shapes], kinds)
    _assert_model_is_the_definition(load, nodes, _valid(pod))


def _assert_model_is_the_definition(load: stranding.Workload,
                                    nodes: list[tuple[list[int], int, int, str]],
                                    pod: Shape) -> None:
    states = [(name, tuple(sorted(left))) for left, _, _, name in nodes]
    got = stranding_tables.StrandingModel(load, states).deltas(
        np.arange(len(nodes)), np.asarray([n[1] for n in nodes]),
        np.asarray([n[2] for n in nodes]), pod)
    # Vectorised sums add in another order than the definition's loop: a delta that is 0
    # by definition can come out as a few ulps of the GPU counts summed (1.8e-12 seen).
    assert got.tolist() == pytest.approx([_reference(n, pod, load) for n in nodes], abs=1e-9)


cpu_only_st = st.builds(Shape, st.sampled_from([1000, 8000, 12500, 32000]), st.just(0),
                        st.just(0))


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(node_st, min_size=1, max_size=6),
       shapes=st.lists(st.one_of(shape_st, share_st), min_size=1, max_size=6),
       cpu_only=st.lists(cpu_only_st, min_size=1, max_size=4),
       contested=st.floats(0.0, 1.0), pod=st.one_of(shape_st, share_st, cpu_only_st))
def test_the_vectorised_model_with_contested_cpu_equals_the_definition(
        nodes: list[tuple[list[int], int, int, str]], shapes: list[Shape],
        cpu_only: list[Shape], contested: float, pod: Shape) -> None:
    load = dataclasses.replace(stranding.workload([_valid(s) for s in shapes + cpu_only]),
                               contested=contested)
    _assert_model_is_the_definition(load, nodes, _valid(pod))


def _gpu_node(name: str, gpus: int, model: str) -> NodeInfo:
    return NodeInfo(parse_node(builders.node(
        name, builders.devices(name, gpus, model=model, split=20), cpu="64", memory="256Gi",
        heartbeat=1.0)), 1.0)


def test_the_learned_workload_knows_the_models_pods_accept() -> None:
    handle = FakeHandle()
    plugin = fragmentation_aware.FragmentationAware(handle)
    for i in range(shares.RELEARN_EVERY):
        pinned = i % 10 < 3
        pod = builders.pod(f"p{i}", [builders.container(gpus=1, cores=100, percent=100,
                                                        cpu="8")],
                           annotations={"nvidia.com/use-gputype": "T4"} if pinned else None)
        for handler in handle.handlers:
            handler(None, pod)
    by_models = {s.models: round(p, 2) for s, p in plugin.load.shapes}
    assert by_models == {("T4",): 0.3, (): 0.7}
    assert plugin.load.density == ()  # no node seen yet: no GPUs to weigh
    snapshot = Snapshot(plugin.columns())
    snapshot.set(_gpu_node("t4", 2, "Tesla T4"))
    snapshot.set(_gpu_node("a100", 8, "NVIDIA A100-SXM4-40GB"))
    pod = builders.pod("q", [builders.container(gpus=1, cores=100, percent=100, cpu="8")])
    plugin.pre_filter(None, parse(pod, Config()), snapshot)  # type: ignore[arg-type]
    # "T4" matches the model "Tesla T4" as the filter matches it: the pinned tasks have a
    # fifth of the GPUs, so they are five times as dense there.
    weights = dict(zip([s.models for s, _ in plugin.load.gpu_shapes],
                       plugin.load.weights("Tesla T4"), strict=True))
    assert weights == {(): 1.0, ("T4",): 5.0}
    assert plugin.load.weights("NVIDIA A100-SXM4-40GB") == (1.0, 0.0)


def test_the_learned_workload_knows_how_much_cpu_cpu_only_pods_contest() -> None:
    handle = FakeHandle()
    plugin = fragmentation_aware.FragmentationAware(handle)
    for i in range(shares.RELEARN_EVERY):
        gpu = i % 2 == 0
        container = (builders.container(gpus=1, cores=100, percent=100, cpu="8") if gpu
                     else builders.container(gpus=None, cpu="16"))
        for handler in handle.handlers:
            handler(None, builders.pod(f"p{i}", [container]))
    assert plugin.load.contested == 0.0  # no node seen yet: no CPU to run out of
    assert plugin.load.cpu_only_sizes == ((16000, 1.0),)
    snapshot = Snapshot(plugin.columns())
    snapshot.set(_gpu_node("a", 4, "Tesla T4"))
    snapshot.set(_gpu_node("b", 4, "Tesla T4"))
    pod = builders.pod("q", [builders.container(gpus=1, cores=100, percent=100, cpu="8")])
    plugin.pre_filter(None, parse(pod, Config()), snapshot)  # type: ignore[arg-type]
    # 16 CPUs per GPU; GPU pods need 8 and CPU-only pods bring 16 more per GPU of demand:
    # 8 fit in the spare, the other half of their demand comes out of the GPU pods' CPU.
    assert plugin.load.cpu_per_milli == pytest.approx(8.0)
    assert plugin.load.contested == pytest.approx(0.5)
