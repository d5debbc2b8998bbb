"""Preemption's parts: PodDisruptionBudget counting, eligibility (kube's
``PodEligibleToPreemptOthers``), PreFilter extensions during the simulation, and what
counts as a victim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.scheduler.preemption_support import (
    HIGH,
    LARGE,
    LOW,
    World,
    budget,
    node,
    pod,
    rejected,
)
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Code, Status, error
from vgpu_scheduler.plugins.kube.default_preemption.budgets import parse_budgets, violations
from vgpu_scheduler.plugins.kube.default_preemption.evict import terminating_by_preemption
from vgpu_scheduler.plugins.kube.default_preemption.started import Started
from vgpu_scheduler.plugins.registry import REGISTRY

# -- budgets -------------------------------------------------------------------------------


def _info(name: str, namespace: str = "default", **labels: str) -> PodInfo:
    obj = pod(name, labels=labels)
    obj["metadata"]["namespace"] = namespace
    return parse(obj, Config())


@pytest.mark.parametrize(("budgets", "pods", "expected"), [
    ([budget("b", {"app": "a"}, 1)], [_info("x", app="a"), _info("y", app="a")],
     [False, True]),
    ([budget("b", {"app": "a"}, 0)], [_info("x"), _info("y", app="b")], [False, False]),
    ([budget("b", {"app": "a"}, 0)], [_info("x", "other", app="a")], [False]),
    ([budget("b", {"app": "a"}, 0, disrupted=["x"])], [_info("x", app="a")], [False]),
    ([budget("b", {"app": "a"}, 1), budget("c", {"tier": "t"}, 0)],
     [_info("x", app="a", tier="t")], [True]),
    ([{"metadata": {"name": "empty", "namespace": "default"}, "spec": {"selector": {}},
       "status": {"disruptionsAllowed": 0}}], [_info("x", app="a")], [False]),
    ([{"metadata": {"name": "bad", "namespace": "default"},
       "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}],
     [_info("x", a="1")], [False]),
], ids=["second pod breaks", "unmatched", "other namespace", "already disrupted",
        "any budget", "empty selector selects nothing", "malformed selector"])
def test_budget_violations(budgets: list[Obj], pods: list[PodInfo],
                           expected: list[bool]) -> None:
    assert violations(pods, parse_budgets(budgets)) == expected


# -- eligibility ---------------------------------------------------------------------------


def _terminating(obj: Obj, *, by_preemption: bool) -> Obj:
    obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    if by_preemption:
        obj["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                            "reason": "PreemptionByScheduler"})
    return obj


@pytest.mark.parametrize(("victim", "status", "waits"), [
    (_terminating(pod("p1", LOW, on="node1"), by_preemption=True), Code.UNSCHEDULABLE, True),
    # The nominated node cannot take the pod whatever leaves: preempt elsewhere.
    (_terminating(pod("p1", LOW, on="node1"), by_preemption=True),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, False),
    # Deleted by someone else, or not deleted: no preemption of ours is under way.
    (_terminating(pod("p1", LOW, on="node1"), by_preemption=False), Code.UNSCHEDULABLE, False),
    (pod("p1", LOW, on="node1"), Code.UNSCHEDULABLE, False),
    # Terminating but not of lower priority: it was no victim of this pod.
    (_terminating(pod("p1", HIGH, on="node1"), by_preemption=True), Code.UNSCHEDULABLE,
     False),
], ids=["victims terminating", "nominated node unresolvable", "deleted by someone else",
        "not terminating", "not lower priority"])
def test_a_pod_waits_for_the_victims_of_its_last_preemption(victim: Obj, status: Code,
                                                            waits: bool) -> None:
    world = World([node("node1", ("0", "0"), pods=1)], [victim])
    preemptor = pod("p", HIGH)
    preemptor["status"] = {"nominatedNodeName": "node1"}
    got = world.post_filter(preemptor, {"node1": Status(status)})
    if waits:
        assert got.code is Code.UNSCHEDULABLE
        assert got.message == ("preemption: not eligible due to a terminating pod on the "
                               "nominated node.")
        assert "p1" in world.names()
        rec = world.sched.cache.pod("default/p")
        assert rec is not None and rec.nominated and rec.node == "node1"
    else:
        assert got.message != ("preemption: not eligible due to a terminating pod on the "
                               "nominated node.")


def _leaving(reason: str | None, *, deleting: bool = True) -> Obj:
    obj = pod("p1", LOW, on="node1")
    if deleting:
        obj = _terminating(obj, by_preemption=False)
    obj["metadata"]["uid"] = "uid-p1"
    if reason is not None:
        obj["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                            "reason": reason})
    return obj


@pytest.mark.parametrize(("conditions", "reason", "mine", "deleting", "waits"), [
    # 1.26 on: only kube's mark says "preempted" (an eviction's own says nothing of why)...
    (True, "PreemptionByScheduler", False, True, True),
    (True, "EvictionByEvictionAPI", False, True, False),
    # ...unless it is a victim of the preemption this scheduler started for the pod, whose
    # mark and nomination the watch has not shown yet, or even its deletion (a pod with
    # no grace period is deleted at once, never marked as being deleted).
    (True, "EvictionByEvictionAPI", True, True, True),
    (True, None, True, True, True),
    (True, None, True, False, True),
    (False, None, True, False, True),
    # Before 1.26 nobody marks victims: any lower-priority pod leaving is waited for, as
    # kube-scheduler does without the PodDisruptionConditions feature.
    (False, None, False, True, True),
    (False, None, False, False, False),
], ids=["marked", "evicted by someone", "ours, mark not seen", "ours, evicted before 1.26",
        "ours, deletion not seen", "ours, deletion not seen, before 1.26", "before 1.26",
        "not leaving"])
def test_which_leaving_pods_a_preemptor_waits_for(conditions: bool, reason: str | None,
                                                  mine: bool, deleting: bool,
                                                  waits: bool) -> None:
    world = World([node("node1", ("0", "0"), pods=1)], [_leaving(reason, deleting=deleting)],
                  cluster=MemoryCluster(disruption_conditions=conditions))
    preemptor = pod("p", HIGH)
    if mine:
        world.plugin.started.record("default/p", Started("node1", frozenset({"uid-p1"})))
    else:
        preemptor["status"] = {"nominatedNodeName": "node1"}
    got = world.post_filter(preemptor, {"node1": Status(Code.UNSCHEDULABLE)})
    assert (got.message == "preemption: not eligible due to a terminating pod on the "
                           "nominated node.") is waits


def test_terminating_by_preemption_needs_both_marks() -> None:
    obj = pod("v", on="n")
    assert not terminating_by_preemption(obj)
    assert not terminating_by_preemption(_terminating(pod("v", on="n"), by_preemption=False))
    assert terminating_by_preemption(_terminating(pod("v", on="n"), by_preemption=True))


# -- PreFilter extensions ------------------------------------------------------------------


class TestExtension:
    """A PreFilter whose extensions fail on nodes labelled ``error: "true"`` (kube's
    TestPlugin); it records every call so the simulation's bookkeeping can be checked."""

    name = "TestExtension"
    __test__ = False

    def __init__(self, handle: Handle) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS

    def _call(self, what: str, pod: PodInfo, other: NodePod, node: NodeInfo) -> Status:
        self.calls.append((what, other.info.name, node.name))
        if node.static.labels.get("error") == "true":
            return error(f"failed to {what} pod: {pod.name}")
        return SUCCESS

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        return self._call("add", pod, added, node)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        return self._call("remove", pod, removed, node)


def failing_extension_world(nodes: Sequence[Obj], pods: Sequence[Obj]) -> World:
    registry: dict[str, Any] = {**REGISTRY, "TestExtension": TestExtension}
    return World(nodes, pods, registry=registry,
                 plugins=("PrioritySort", "NodeResourcesFit", "TestExtension",
                          "DefaultPreemption", "VGPUBinder"))


def test_extensions_hear_every_pod_taken_away_and_given_back() -> None:
    world = failing_extension_world([node("node1")], [
        pod("keep", LOW, ("100m", "100"), on="node1"), pod("go", LOW, LARGE, on="node1")])
    found, _ = world.dry_run(pod("p", HIGH, LARGE))
    assert [(c.node, [v.info.name for v in c.victims]) for c in found] == [("node1", ["go"])]
    ext = next(p for p in world.sched.framework.plugins if isinstance(p, TestExtension))
    # Both leave; each is offered back; "go" does not fit back and leaves again.
    assert sorted(ext.calls[:2]) == [("remove", "go", "node1"), ("remove", "keep", "node1")]
    assert sorted(ext.calls[2:]) == sorted([("add", "keep", "node1"), ("add", "go", "node1"),
                                            ("remove", "go", "node1")])
    assert world.post_filter(pod("p", HIGH, LARGE), rejected("node1")).ok


# -- who is a victim -----------------------------------------------------------------------


def test_pods_still_being_bound_are_not_victims() -> None:
    world = World([node("node1", ("0", "0"), pods=1)])
    other = pod("assumed", LOW)
    world.sched.cache.assume(parse(other, world.config), "node1")
    status = world.post_filter(pod("p", HIGH), rejected("node1"))
    assert status.message == ("preemption: 0/1 nodes are available: 1 No preemption victims "
                              "found for incoming pod.")


def test_a_lower_priority_nomination_is_displaced_without_an_eviction() -> None:
    world = World([node("node1", ("0", "0"), pods=1)])
    waiting = parse(pod("waiting", LOW), world.config)
    world.cluster.create("pods", waiting.pod)
    world.sched.framework.nominate(waiting, "node1", None)
    world.cluster.patch_status("pods", "waiting", {"nominatedNodeName": "node1"}, "default")
    status = world.post_filter(pod("p", HIGH), rejected("node1"))
    assert status.ok, status
    assert world.nominated("p") == "node1" and world.nominated("waiting") is None
    assert world.sched.cache.pod("default/waiting") is None
    assert {"p", "waiting"} <= world.names()
    assert "taking the room held for 1 lower-priority pod" in status.message


def test_a_victim_replaced_by_a_successor_of_its_name_is_not_evicted() -> None:
    world = World([node("node1", ("0", "0"), pods=1)], [pod("p1", LOW, on="node1")])
    info, state = world.prepare(pod("p", HIGH))  # p1 is in the snapshot
    # Its controller replaced it meanwhile; the watch has not shown that yet.
    world.cluster.delete("pods", "p1", "default")
    successor = world.cluster.create("pods", pod("p1", LOW, on="node1"))
    diagnosis = Diagnosis(len(world.sched.snapshot), rejected("node1"))
    status = world.plugin.post_filter(state, info, world.sched.snapshot, diagnosis)
    assert status.ok, status  # the victim it chose is gone: nothing left to evict
    assert world.cluster.get("pods", "p1", "default")["metadata"]["uid"] == (
        successor["metadata"]["uid"])
