"""GPU model scarcity: each shape's density per model (table-driven from the definition),
the stranding measure weighed by it (the vectorised model still equals the definition), and
the plugin learning the constraints from pods it sees."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.nodeinfo import NodeInfo, parse_node
from scheduler.framework.podinfo import parse
from scheduler.framework.snapshot import Snapshot
from scheduler.placement import demand, shares, stranding, stranding_tables
from scheduler.placement.shapes import Shape
from scheduler.plugins import fragmentation_aware
from tests.scheduler.helpers import FakeHandle
from tests.simulate.test_stranding import _reference, _valid, node_st, shape_st, share_st
from vgpu import builders
from vgpu.config import Config

ANY = Shape(8000, 1000, 1)
HALF = Shape(4000, 500, 1)
ON_T4 = Shape(8000, 1000, 1, ("T4",))
NOT_T4 = Shape(8000, 1000, 1, excluded=("T4",))


def _dens(shapes: list[tuple[Shape, float]], capacity: dict[str, int]
          ) -> dict[str, list[float]]:
    return {m: [round(x, 3) for x in row]
            for m, row in demand.densities(shapes, capacity).items()}


@pytest.mark.parametrize(("shapes", "capacity", "expected"), [
    # No shape names a model: no densities, every shape weighs 1 on every model.
    ([(ANY, 0.5), (HALF, 0.5)], {"G2": 90, "T4": 10}, {}),
    # A tenth of the GPUs are T4: a task pinned there is ten times as dense on each.
    ([(ANY, 0.8), (ON_T4, 0.2)], {"G2": 90, "T4": 10},
     {"G2": [1.0, 0.0], "T4": [1.0, 10.0]}),
    # nouse-gputype from the other side: half the GPUs are left to the refusing shape.
    ([(ANY, 0.6), (NOT_T4, 0.4)], {"G2": 50, "T4": 50},
     {"G2": [1.0, 2.0], "T4": [1.0, 0.0]}),
    # Several models: the capacity of all of them counts (100 / (60 + 25)).
    ([(Shape(4000, 500, 1, ("G2", "V100")), 1.0)], {"G2": 60, "T4": 15, "V100": 25},
     {"G2": [1.176], "T4": [0.0], "V100": [1.176]}),
    # A shape no GPU of the cluster takes is no demand anywhere; a model without GPUs
    # gets no row.
    ([(ANY, 0.5), (Shape(1, 1000, 1, ("A100",)), 0.5)], {"G2": 10, "A100": 0},
     {"G2": [1.0, 0.0]}),
])
def test_densities(shapes: list[tuple[Shape, float]], capacity: dict[str, int],
                   expected: dict[str, list[float]]) -> None:
    assert _dens(shapes, capacity) == expected


models_st = st.sampled_from([(), ("T4",), ("G2",), ("T4", "G2"), ("V100",)])


@given(pins=st.lists(models_st, min_size=1, max_size=6),
       capacity=st.dictionaries(st.sampled_from(["G2", "T4", "V100", "A10"]),
                                st.integers(0, 100), min_size=1))
def test_a_shape_weighs_as_much_over_the_cluster_as_without_constraints(
        pins: list[tuple[str, ...]], capacity: dict[str, int]) -> None:
    shapes = [(Shape(1000, 1000, 1, m), 1.0 / len(pins)) for m in pins]
    found = demand.densities(shapes, capacity)
    total = sum(capacity.values())
    if not found:  # nothing to weigh: no pins, or no GPUs
        assert not any(pins) or total == 0
        return
    for j, (s, _) in enumerate(shapes):
        spread = sum(row[j] * capacity[m] / total for m, row in found.items())
        placeable = any(s.allows(m) and c > 0 for m, c in capacity.items())
        # Every task is somewhere: its density averages to 1 over the cluster's GPUs.
        assert spread == pytest.approx(1.0 if placeable else 0.0)


def test_the_measure_weighs_a_scarce_model_by_its_density() -> None:
    tasks = [ANY] * 8 + [ON_T4] * 2
    plain = stranding.workload(tasks)
    scarce = stranding.workload(tasks, {"G2": 90, "T4": 10})
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
       capacity=st.fixed_dictionaries({"G2": st.integers(1, 100), "T4": st.integers(1, 100)}),
       pod=st.one_of(shape_st, share_st))
def test_the_vectorised_model_with_densities_equals_the_definition(
        nodes: list[tuple[list[int], int, int, str]], shapes: list[Shape],
        capacity: dict[str, int], pod: Shape) -> None:
    load = stranding.workload([_valid(s) for s in shapes], capacity)
    pod = _valid(pod)
    states = [(name, tuple(sorted(left))) for left, _, _, name in nodes]
    got = stranding_tables.StrandingModel(load, states).deltas(
        np.arange(len(nodes)), np.asarray([n[1] for n in nodes]),
        np.asarray([n[2] for n in nodes]), pod)
    assert got.tolist() == pytest.approx([_reference(n, pod, load) for n in nodes])


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
