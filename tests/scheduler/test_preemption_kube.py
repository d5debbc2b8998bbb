"""kube-scheduler's DefaultPreemption cases (``default_preemption_test.go``: PostFilter,
DryRunPreemption, SelectBestCandidate, PodEligibleToPreemptOthers, Preempt), on
CPU/memory pods with NodeResourcesFit, through the real host.

Left out: extenders (vgpu-scheduler has none), pod groups, custom eligibility and
ordering hooks (not configurable here), and the InterPodAffinity and PodTopologySpread
cases (those plugins test their own PreFilter extensions).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.preemption_support import (
    HIGH,
    LARGE,
    LOW,
    MEDIUM,
    MID,
    NEG,
    SMALL,
    VERY_HIGH,
    VERY_LARGE,
    World,
    budget,
    node,
    pod,
    rejected,
)
from vgpu_scheduler.framework.status import Code, Status

ONE_POD = ("0", "0")
SMALL_NODE = ("200m", "400")
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"

# -- PostFilter ----------------------------------------------------------------------------

POST_FILTER: list[tuple[str, dict[str, Any], str | None, str]] = [
    ("a higher-priority pod displaces a lower one",
     {"nodes": [node("node1", ONE_POD, pods=1)], "pods": [pod("p1", on="node1")],
      "pod": pod("p", HIGH), "statuses": rejected("node1")},
     "node1", ""),
    ("equal priority is no reason to preempt",
     {"nodes": [node("node1", ONE_POD, pods=1)], "pods": [pod("p1", on="node1")],
      "pod": pod("p"), "statuses": rejected("node1")},
     None, f"preemption: 0/1 nodes are available: 1 {NO_VICTIMS}."),
    ("a node the filters found unresolvable is left alone",
     {"nodes": [node("node1", ONE_POD, pods=1)], "pods": [pod("p1", on="node1")],
      "pod": pod("p", HIGH), "statuses": rejected("node1", code=UNRESOLVABLE)},
     None, f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."),
    ("a node without a verdict counts as unresolvable",
     {"nodes": [node("node1", ONE_POD, pods=1)], "pods": [pod("p1", on="node1")],
      "pod": pod("p", HIGH), "statuses": {}},
     None, f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."),
    ("only the node with a lower-priority pod is a candidate",
     {"nodes": [node("node1", ONE_POD, pods=1), node("node2", ONE_POD, pods=1)],
      "pods": [pod("p1", HIGH, on="node1"), pod("p2", LOW, on="node2")],
      "pod": pod("p", MID), "statuses": rejected("node1", "node2")},
     "node2", ""),
    ("not enough room even without every lower-priority pod",
     {"nodes": [node("node1", SMALL_NODE), node("node2", SMALL_NODE)],
      "pods": [pod("p1", on="node1"), pod("p2", on="node2")],
      "pod": pod("p", HIGH, LARGE), "statuses": rejected("node1", "node2")},
     None, "preemption: 0/2 nodes are available: 2 Insufficient cpu."),
    ("mixed reasons: too small, or nobody to preempt",
     {"nodes": [node("node1", ONE_POD, pods=1), node("node2", SMALL_NODE),
                node("node3", ONE_POD, pods=1)],
      "pods": [pod("p1", HIGH, on="node1"), pod("p2", on="node2"),
               pod("p3", HIGH, on="node3")],
      "pod": pod("p", HIGH, LARGE), "statuses": rejected("node1", "node2", "node3")},
     None, f"preemption: 0/3 nodes are available: 2 {NO_VICTIMS}, 1 Insufficient cpu."),
    ("mixed reasons: unresolvable, unknown and too small",
     {"nodes": [node(f"node{i}", SMALL_NODE) for i in range(1, 5)],
      "pods": [pod("p1", on="node1"), pod("p2", on="node2")],
      "pod": pod("p", HIGH, LARGE),
      "statuses": {**rejected("node1", "node2"), **rejected("node4", code=UNRESOLVABLE)}},
     None, f"preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 {NOT_HELPFUL}."),
]


@pytest.mark.parametrize(("case", "nominated", "message"),
                         [pytest.param(c, n, m, id=name) for name, c, n, m in POST_FILTER])
def test_post_filter(case: dict[str, Any], nominated: str | None, message: str) -> None:
    world = World(case["nodes"], case["pods"], case.get("budgets", ()))
    status = world.post_filter(case["pod"], case["statuses"])
    if nominated is None:
        assert status.code is Code.UNSCHEDULABLE
        assert status.message == message
        assert world.nominated("p") is None
    else:
        assert status.code is Code.SUCCESS
        assert world.nominated("p") == nominated


def test_equal_budget_violations_fall_to_the_lowest_highest_victim() -> None:
    world = World([node("node1", ONE_POD, pods=1), node("node2", ONE_POD, pods=1)],
                  [pod("p1", HIGH, on="node1", labels={"pdb": "lenient"}),
                   pod("p2", LOW, on="node1", labels={"pdb": "strict"}),
                   pod("p3", MID, on="node2", labels={"pdb": "strict"})],
                  [budget("strict", {"pdb": "strict"}, 0),
                   budget("lenient", {"pdb": "lenient"}, 2**31 - 1)])
    best = world.best(pod("p", VERY_HIGH))
    assert (best.node, [v.info.name for v in best.victims], best.violations) == (
        "node2", ["p3"], 1)
    # kube-scheduler would now delete p3 in spite of its budget; the Eviction API refuses
    # (our documented difference): nothing is evicted, nobody is nominated, the pod backs
    # off and tries again with the budgets as they are then.
    status = world.post_filter(pod("p", VERY_HIGH), rejected("node1", "node2"))
    assert status.code is Code.SUCCESS  # the preemption started; its calls then failed
    assert [e.message for e in world.cluster.events(name="p", reason="FailedScheduling")] == [
        "preemption: eviction of default/p3 on node node2 was refused by a "
        "PodDisruptionBudget; will retry."]
    assert world.names() >= {"p1", "p2", "p3"}
    # (The preemptor as parsed here has no uid: the cache keys it by its name.)
    assert world.nominated("p") is None and world.sched.cache.pod("default/p") is None


def test_a_pre_filter_extension_error_fails_preemption_when_no_node_is_left() -> None:
    from tests.scheduler.test_preemption_victims import failing_extension_world

    world = failing_extension_world([node("node1", LARGE, labels={"error": "true"})],
                                    [pod("p1", on="node1")])
    status = world.post_filter(pod("p", HIGH, LARGE), rejected("node1"))
    assert status.code is Code.ERROR
    assert status.message == ("preemption: running RemovePod on PreFilter plugin "
                              "'TestExtension': failed to remove pod: p")


def test_a_pre_filter_extension_error_on_one_node_leaves_the_others() -> None:
    from tests.scheduler.test_preemption_victims import failing_extension_world

    world = failing_extension_world(
        [node("node1", LARGE, labels={"error": "true"}), node("node2", LARGE)],
        [pod("p1", on="node1"), pod("p2", res=MEDIUM, on="node2")])
    status = world.post_filter(pod("p", HIGH, LARGE), rejected("node1", "node2"))
    assert status.code is Code.SUCCESS
    assert world.nominated("p") == "node2"


# -- DryRunPreemption ----------------------------------------------------------------------

TWO_NODES = [node("node1"), node("node2")]
DRY_RUN: list[tuple[str, list[Any], list[Any], dict[str, list[str]]]] = [
    ("both nodes fit once their lower-priority pod goes", TWO_NODES,
     [pod("p1", MID, LARGE, on="node1"), pod("p2", MID, LARGE, on="node2")],
     {"node1": ["p1"], "node2": ["p2"]}),
    ("nobody of lower priority: no candidate", TWO_NODES,
     [pod("p1", MID, LARGE, on="node1"), pod("p2", MID, LARGE, on="node2")], {}),
    ("the small lower-priority pod stays, the medium one goes", TWO_NODES,
     [pod("p1.1", LOW, SMALL, on="node1"), pod("p1.2", MID, LARGE, on="node1"),
      pod("p2", MID, LARGE, on="node2")],
     {"node1": ["p1.2"], "node2": ["p2"]}),
    ("mixed priorities: the least important pods that make room", TWO_NODES,
     [pod("p1.1", MID, SMALL, on="node1"), pod("p1.2", LOW, SMALL, on="node1"),
      pod("p1.3", MID, MEDIUM, on="node1"), pod("p1.4", HIGH, SMALL, on="node1"),
      pod("p2", HIGH, LARGE, on="node2")],
     {"node1": ["p1.2", "p1.3"]}),
    ("equal priorities: the later started pod goes", TWO_NODES,
     [pod("p1.1", LOW, SMALL, on="node1", start=5), pod("p1.2", LOW, SMALL, on="node1", start=4),
      pod("p1.3", MID, MEDIUM, on="node1", start=3),
      pod("p1.4", HIGH, SMALL, on="node1", start=2), pod("p2", HIGH, LARGE, on="node2", start=1)],
     {"node1": ["p1.1", "p1.3"]}),
]


@pytest.mark.parametrize(("nodes", "pods", "expected"),
                         [pytest.param(n, p, e, id=name) for name, n, p, e in DRY_RUN])
def test_dry_run(nodes: list[Any], pods: list[Any], expected: dict[str, list[str]]) -> None:
    preemptor = pod("p", HIGH if expected else LOW, LARGE)
    assert World(nodes, pods).candidates(preemptor) == expected


@pytest.mark.parametrize(("disrupted", "pods", "violations"), [
    ((), ["p1.1", "p1.2"], 1),
    (("p2",), ["p1.1", "p1.2"], 1),  # a disrupted pod of another node spares nothing here
    (("p1.2",), ["p1.1", "p1.2"], 0),  # already counted by the API server
    (("p1.3",), ["p1.1", "p1.2", "p1.3"], 1),
])
def test_dry_run_counts_budget_violations(disrupted: tuple[str, ...], pods: list[str],
                                          violations: int) -> None:
    placed = [pod(n, MID, MEDIUM, on="node1", labels={"app": "foo"}) for n in pods]
    world = World([node("node1")], placed,
                  [budget("foo", {"app": "foo"}, 1, disrupted)])
    found, _ = world.dry_run(pod("p", HIGH, VERY_LARGE))
    assert [(c.node, sorted(v.info.name for v in c.victims), c.violations)
            for c in found] == [("node1", pods, violations)]


FIVE = [node(f"node{i}") for i in range(1, 6)]


@pytest.mark.parametrize(("priorities", "labels", "offset", "absolute", "expected"), [
    # 40 % of 5 nodes is 2: the simulation stops at two candidates, from the offset on.
    ([MID] * 5, {}, 4, 1, ["node1", "node5"]),
    ([MID, VERY_HIGH, MID, MID, VERY_HIGH], {}, 4, 1, ["node1", "node3"]),
    ([MID] * 5, {}, 1, 1, ["node2", "node3"]),
    ([MID] * 5, {}, 3, 1, ["node4", "node5"]),
    # Candidates that break a budget do not stop the search until one that breaks none
    # is found; each kind keeps at most two (node2 is simulated and dropped).
    ([MID] * 5, {1: "foo", 2: "foo", 5: "foo"}, 4, 2, ["node1", "node3", "node5"]),
])
def test_dry_run_samples_from_an_offset(priorities: list[int], labels: dict[int, str],
                                        offset: int, absolute: int,
                                        expected: list[str]) -> None:
    pods = [pod(f"p{i}", prio, LARGE, on=f"node{i}",
                labels={"app": labels[i]} if i in labels else None)
            for i, prio in enumerate(priorities, start=1)]
    world = World(FIVE, pods, [budget("foo", {"app": "foo"}, 0)])
    world.plugin.min_candidate_percentage, world.plugin.min_candidate_absolute = 40, absolute
    got = world.candidates(pod("p", HIGH, LARGE), offset=offset)
    assert sorted(got) == expected


# -- SelectBestCandidate -------------------------------------------------------------------

def _pods(spec: str) -> list[Any]:
    """``"1.1:MID:MEDIUM:0 ..."``: pod p<id> on node<id's first part>."""
    sizes = {"SMALL": SMALL, "MEDIUM": MEDIUM, "LARGE": LARGE}
    prios = {"NEG": NEG, "LOW": LOW, "MID": MID, "HIGH": HIGH}
    out = []
    for item in spec.split():
        name, prio, size, start = item.split(":")
        out.append(pod(f"p{name}", prios[prio], sizes[size], on=f"node{name.split('.')[0]}",
                       start=float(start)))
    return out


@pytest.mark.parametrize(("nodes", "spec", "priority", "expected"), [
    (2, "1:MID:LARGE:0 2:MID:LARGE:0", HIGH, {"node1", "node2"}),
    (3, "1.1:MID:MEDIUM:0 1.2:MID:LARGE:0 2.1:MID:MEDIUM:0 2.2:LOW:MEDIUM:0 "
        "3.1:LOW:MEDIUM:0 3.2:LOW:MEDIUM:0", HIGH, {"node3"}),
    (3, "1.1:MID:MEDIUM:0 1.2:MID:LARGE:0 2.1:MID:LARGE:0 2.2:LOW:MEDIUM:0 "
        "3.1:MID:MEDIUM:0 3.2:MID:MEDIUM:0", HIGH, {"node2"}),
    (3, "1.1:MID:SMALL:0 1.2:NEG:SMALL:0 1.3:MID:SMALL:0 1.4:NEG:SMALL:0 2.1:MID:LARGE:0 "
        "2.2:NEG:MEDIUM:0 3.1:MID:MEDIUM:0 3.2:NEG:SMALL:0 3.3:LOW:SMALL:0", HIGH, {"node2"}),
    (3, "1.1:MID:SMALL:0 1.2:NEG:SMALL:0 1.3:NEG:SMALL:0 2.1:MID:LARGE:0 2.2:NEG:MEDIUM:0 "
        "3.1:MID:MEDIUM:0 3.2:NEG:SMALL:0 3.3:LOW:SMALL:0", HIGH, {"node2"}),
    (4, "1.1:MID:SMALL:0 1.2:LOW:SMALL:0 1.3:LOW:SMALL:0 2.1:HIGH:LARGE:0 3.1:MID:MEDIUM:0 "
        "3.2:LOW:SMALL:0 3.3:LOW:SMALL:0 3.4:LOW:MEDIUM:0 4.1:MID:MEDIUM:0 4.2:MID:SMALL:0 "
        "4.3:MID:SMALL:0 4.4:NEG:SMALL:0", VERY_HIGH, {"node1"}),
    (3, "1.1:MID:MEDIUM:2 1.2:MID:MEDIUM:2 2.1:MID:MEDIUM:3 2.2:MID:MEDIUM:3 "
        "3.1:MID:MEDIUM:1 3.2:MID:MEDIUM:1", HIGH, {"node2"}),
    (3, "1.1:MID:MEDIUM:4 1.2:MID:MEDIUM:2 2.1:MID:MEDIUM:5 2.2:MID:MEDIUM:1 "
        "3.1:MID:MEDIUM:3 3.2:MID:MEDIUM:6", HIGH, {"node3"}),
    (3, "1.1:LOW:MEDIUM:4 1.2:MID:MEDIUM:2 2.1:MID:MEDIUM:6 2.2:LOW:MEDIUM:1 "
        "3.1:LOW:MEDIUM:3 3.2:MID:MEDIUM:5", HIGH, {"node2"}),
], ids=["tie", "lowest highest victim", "smallest sum", "fewest victims", "shifted sums",
        "criteria apart", "latest start per node", "latest start of all",
        "priorities then start"])
def test_select_best_candidate(nodes: int, spec: str, priority: int,
                               expected: set[str]) -> None:
    world = World([node(f"node{i}") for i in range(1, nodes + 1)], _pods(spec))
    assert world.best(pod("p", priority, VERY_LARGE)).node in expected


# -- Preempt -------------------------------------------------------------------------------

BASIC = [pod("p1.1", LOW, SMALL, on="node1"), pod("p1.2", LOW, SMALL, on="node1"),
         pod("p2.1", HIGH, LARGE, on="node2"), pod("p3.1", MID, MEDIUM, on="node3")]


@pytest.mark.parametrize(("policy", "nominated", "evicted"), [
    ("PreemptLowerPriority", "node1", {"p1.1", "p1.2"}),
    (None, "node1", {"p1.1", "p1.2"}),
    ("Never", None, set()),
])
def test_preempt(policy: str | None, nominated: str | None, evicted: set[str]) -> None:
    world = World([node(f"node{i}") for i in (1, 2, 3)], BASIC)
    spec = {"preemptionPolicy": policy} if policy else {}
    status: Status = world.post_filter(pod("p", HIGH, VERY_LARGE, **spec),
                                       rejected("node1", "node2", "node3"))
    assert world.nominated("p") == nominated
    assert {"p1.1", "p1.2", "p2.1", "p3.1"} - world.names() == evicted
    if policy == "Never":
        assert status.message == "preemption: not eligible due to preemptionPolicy=Never."
    else:
        assert [e.reason for e in world.cluster.events(name="p1.1")] == ["Preempted"]
