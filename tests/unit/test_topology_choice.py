"""The choice of a GPU set by links (vgpu.topology.choice): tables on the named shapes,
and properties checked against every set there is."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.topology import shapes
from vgpu.topology.choice import _Idle, best_worst, choose
from vgpu.topology.links import PCIE_LEVELS, GpuLink, Link, LinkMatrix, label, matrix


def shape_matrix(name: str, n: int) -> LinkMatrix:
    uuids = [str(i) for i in range(n)]
    return matrix(uuids, shapes.links_of(shapes.SHAPES[name](n), uuids))


def idle_pick(m: LinkMatrix, count: int, *, busy: Sequence[int] = (),
              candidates: Sequence[int] | None = None) -> tuple[int, ...] | None:
    """What a policy indifferent among idle GPUs gets: busy GPUs still fit (a share)."""
    order = list(candidates if candidates is not None else range(len(m)))
    # Busy GPUs first, as binpack ranks them; each its own class, idle ones one class.
    order.sort(key=lambda p: (p not in busy, p))
    classes = [i if p in busy else len(busy) for i, p in enumerate(order)]
    pick = choose(order, count, m, classes=classes,
                  idle=[p for p in range(len(m)) if p not in busy])
    return None if pick is None else tuple(sorted(pick.positions))


@pytest.mark.parametrize(("name", "n", "count", "busy", "expected"), [
    # NVSwitch: every pair alike, so the policy's first GPUs.
    ("nvswitch", 8, 2, (), (0, 1)),
    ("nvswitch", 8, 4, (), (0, 1, 2, 3)),
    ("nvswitch", 8, 8, (), tuple(range(8))),
    # PCIe, two sockets: a pair under one switch, four on one socket.
    ("pcie", 8, 2, (), (0, 1)),
    ("pcie", 8, 4, (), (0, 1, 2, 3)),
    # One GPU taken by a share: binpack's busy GPU is not idle, its partner joins it.
    ("pcie", 8, 2, (0,), (0, 1)),
    # Two NVLink-bridged pairs: a two-GPU pod gets a bridge.
    ("nvlink-pairs", 4, 2, (), (0, 1)),
    # Mixed: the NV12 pairs first, then the NVLinked half, PCIe GPUs for one-GPU pods.
    ("mixed", 8, 2, (), (0, 1)),
    ("mixed", 8, 3, (), (0, 1, 2)),
    ("mixed", 8, 4, (), (0, 1, 2, 3)),
    ("mixed", 8, 1, (), (4,)),
])
def test_best_sets_on_the_shapes(name: str, n: int, count: int, busy: tuple[int, ...],
                                 expected: tuple[int, ...]) -> None:
    assert idle_pick(shape_matrix(name, n), count, busy=busy) == expected


def test_a_one_gpu_pod_leaves_nvlink_pairs_whole() -> None:
    # Two bridged pairs and a loner on PCIe: the loner, though it is last in index order.
    m = matrix([str(i) for i in range(5)], [
        GpuLink(str(a), str(b), Link("socket", 12 if (a, b) in ((0, 1), (2, 3)) else 0, 3))
        for a in range(5) for b in range(a + 1, 5)])
    assert idle_pick(m, 1) == (4,)
    # With the loner busy (and first in binpack's order) it is still the one taken.
    assert idle_pick(m, 1, busy=(4,)) == (4,)
    # A pair already broken (GPU 0 busy, not a candidate): its partner goes first.
    assert idle_pick(m, 1, busy=(0,), candidates=[1, 2, 3, 4]) == (1,)
    # Two GPUs: a whole pair, never a loner and half a pair.
    assert idle_pick(m, 2) == (0, 1)


def test_a_four_gpu_pod_keeps_the_other_socket_whole() -> None:
    m = shape_matrix("pcie", 8)
    # GPU 1 busy and not a candidate: of the pairs left, the one on the socket with the
    # hole, so that the other socket's four stay together.
    assert idle_pick(m, 2, busy=(1,), candidates=[0, 2, 3, 4, 5, 6, 7]) == (2, 3)
    assert idle_pick(m, 1, busy=(1,), candidates=[0, 2, 3, 4, 5, 6, 7]) == (0,)


def test_the_policy_decides_among_sets_of_equal_links() -> None:
    m = shape_matrix("nvlink-pairs", 8)
    # The policy ranks 4, 5 first (each its own class): that pair, not 0-1.
    pick = choose([4, 5, 0, 1, 2, 3, 6, 7], 2, m)
    assert pick is not None and pick.positions == (4, 5)
    # But a faster set wins over the policy's first GPUs: 4 and 6 are not bridged.
    pick = choose([4, 6, 0, 1], 2, m)
    assert pick is not None and pick.positions == (0, 1)


def test_numa_groups_and_fixed_gpus() -> None:
    m = shape_matrix("mixed", 8)
    numa = shapes.mixed(8).numa
    # One NUMA node each: the NVLinked half is one socket.
    pick = choose(list(range(8)), 4, m, groups=[numa[p] for p in range(8)])
    assert pick is not None and pick.positions == (0, 1, 2, 3)
    # The socket of GPU 4 must hold all three: PCIe only there.
    order = [4, 5, 6, 7]
    pick = choose(order, 3, m, groups=[numa[p] for p in order])
    assert pick is not None and label(m.slowest(pick.positions) or Link()) == "NODE"
    assert choose(order, 5, m) is None
    # A fixed GPU stays in the set: with GPU 2, its bridge partner 3.
    pick = choose([2, 0, 1, 3], 2, m, fixed=1)
    assert pick is not None and pick.positions == (2, 3)


def test_best_worst() -> None:
    m = shape_matrix("mixed", 8)
    assert label(Link("socket", 12, 3)) == "NV12"
    assert best_worst(list(range(8)), 2, m) == m.ranks[0][1]
    assert best_worst(list(range(8)), 4, m) == m.ranks[1][2]  # NV4 within the half
    assert best_worst(list(range(4, 8)), 2, m) == m.ranks[4][5]  # PIX
    assert best_worst([0], 2, m) is None


# --- properties -----------------------------------------------------------------------------

@st.composite
def nodes(draw: st.DrawFn) -> tuple[LinkMatrix, list[int], list[int], int, list[int]]:
    n = draw(st.integers(1, 7))
    uuids = [str(i) for i in range(n)]
    links = [GpuLink(uuids[a], uuids[b], Link(
        draw(st.sampled_from(PCIE_LEVELS)), draw(st.sampled_from((0, 0, 1, 4, 12))), 3))
        for a in range(n) for b in range(a + 1, n)]
    m = matrix(uuids, links)
    order = draw(st.permutations(range(n)))
    order = order[:draw(st.integers(0, n))]
    # Policy classes: runs of the order, non-decreasing.
    steps = draw(st.lists(st.booleans(), min_size=len(order), max_size=len(order)))
    classes = list(itertools.accumulate(int(s) for s in steps))
    count = draw(st.integers(1, max(n, 1)))
    idle = draw(st.lists(st.sampled_from(range(n)), unique=True))
    return m, order, classes, count, idle


@settings(max_examples=300, deadline=None)
@given(nodes())
def test_never_a_set_slower_than_one_that_fits(
        case: tuple[LinkMatrix, list[int], list[int], int, list[int]]) -> None:
    m, order, classes, count, idle = case
    pick = choose(order, count, m, classes=classes, idle=idle)
    every = list(itertools.combinations(range(len(order)), count))
    if not every:
        assert pick is None
        return
    assert pick is not None
    assert len(set(pick.positions)) == count and set(pick.positions) <= set(order)
    best = max(m.worst([order[i] for i in s]) for s in every)
    assert pick.worst == m.worst(list(pick.positions)) == best
    # Among the fastest sets, none the policy prefers.
    chosen = sorted(classes[order.index(p)] for p in pick.positions)
    assert all(sorted(classes[i] for i in s) >= chosen for s in every
               if m.worst([order[i] for i in s]) == best)
    assert best_worst(order, count, m) == best


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.data())
def test_uniform_links_leave_the_choice_to_the_policy(n: int, data: st.DataObject) -> None:
    m = matrix([str(i) for i in range(n)], [
        GpuLink(str(a), str(b), Link("switch", 4, 3)) for a in range(n) for b in range(a + 1, n)])
    order = data.draw(st.permutations(range(n)))
    count = data.draw(st.integers(1, n))
    pick = choose(order, count, m, idle=range(n))
    assert pick is not None and list(pick.positions) == order[:count]


@settings(max_examples=200, deadline=None)
@given(nodes())
def test_one_gpu_by_its_group_sizes_is_the_leftover_rule(
        case: tuple[LinkMatrix, list[int], list[int], int, list[int]]) -> None:
    """For one GPU the cheap rule (the smallest idle group at each speed, fastest first)
    picks what comparing the whole leftover would."""
    m, _, _, _, idle = case
    if not idle:
        return
    view = _Idle(m, idle)
    everyone = list(range(len(m)))
    by_alone = min(everyone, key=lambda p: (view.alone(p), p))
    by_leftover = max(everyone, key=lambda p: (view.leftover([p]), -p))
    assert by_alone == by_leftover
