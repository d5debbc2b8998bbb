"""What a failed binding did: the verdict from the pod as read after it failed, and what
the scheduler does with each (issue 31: nothing bound is ever forgotten)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import vgpu.annotations as ann
from tests.scheduler.e2e_support import gpu_node, node_of, setup, uid_of
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.errors import OutcomeUnknownError
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.host.bind_check import Verdict, judge

MINE = codecs.Assignment("n1", {"main": (codecs.GrantedDevice("GPU-n1-0", 4000, 30),)})
OTHER = codecs.Assignment("n1", {"main": (codecs.GrantedDevice("GPU-n1-1", 4000, 30),)})
POD = builders.pod("p", [builders.container(gpumem=4000, cores=30)])
POD["metadata"]["uid"] = "uid-1"
INFO = parse(POD, Config())


def seen(*, uid: str = "uid-1", node: str | None = None,
         assignment: codecs.Assignment | None = None, deleting: bool = False) -> Obj:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default", "uid": uid,
                                        "annotations": {}}, "spec": {}}
    if node is not None:
        pod["spec"]["nodeName"] = node
    if assignment is not None:
        pod["metadata"]["annotations"][ann.ASSIGNMENT] = codecs.encode_assignment(assignment)
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return pod


@pytest.mark.parametrize(("pod", "verdict"), [
    (seen(node="n1", assignment=MINE), Verdict.OURS),
    (seen(node="n2", assignment=MINE), Verdict.ELSEWHERE),
    (seen(node="n1", assignment=OTHER), Verdict.ELSEWHERE),
    (seen(node="n1"), Verdict.ELSEWHERE),  # bound without vgpu's assignment
    (seen(), Verdict.PENDING),
    (seen(deleting=True), Verdict.GONE),
    (seen(uid="uid-2"), Verdict.GONE),  # a successor of the name
    # A server before 1.23 bound the successor with this binding: its slices are taken.
    (seen(uid="uid-2", node="n1", assignment=MINE), Verdict.ELSEWHERE),
    (seen(uid="uid-2", node="n1", assignment=OTHER), Verdict.GONE),
    (seen(uid="uid-2", node="n1"), Verdict.GONE),
    (None, Verdict.GONE),
], ids=["ours", "other node", "other slices", "no assignment", "pending", "deleting",
        "successor", "successor bound with these slices", "successor bound with others",
        "successor bound without an assignment", "not found"])
def test_the_verdict(pod: Obj | None, verdict: Verdict) -> None:
    assert judge(INFO, "n1", MINE, pod) is verdict


class AnswerLost(MemoryCluster):
    """The Binding is carried out and its answer never arrives."""

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        super().bind(namespace, name, node, annotations, uid=uid)
        raise OutcomeUnknownError(f"bind pod {name}: the connection ended before the answer")


def test_a_binding_whose_answer_was_lost_counts_as_bound() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1)], cluster=AnswerLost())
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=16000)]))
    sched.pump()
    sched.schedule_one()  # the watch has not shown the binding: only its answer could
    assert node_of(cluster, "p") == "n1"
    rec = sched.cache.pod(uid_of(cluster, "p"))
    assert rec is not None and rec.assumed and rec.binding_finished  # still counted
    assert not cluster.events(name="p", reason="FailedScheduling")
    assert [e.reason for e in cluster.events(name="p")] == []  # no Scheduled: the Binding
    sched.run_until_idle()
    assert uid_of(cluster, "p") not in sched.queue
    rec = sched.cache.pod(uid_of(cluster, "p"))
    assert rec is not None and not rec.assumed  # the watch confirmed it


class OtherBinderFirst(MemoryCluster):
    """Another binder's Binding lands on another node just before ours (409)."""

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        other = codecs.Assignment("n2", {"main": (codecs.GrantedDevice("GPU-n2-0", 16000, 0),)})
        super().bind(namespace, name, "n2",
                     {ann.ASSIGNMENT: codecs.encode_assignment(other)})
        super().bind(namespace, name, node, annotations, uid=uid)


def test_a_binding_another_binder_won_keeps_the_room_until_the_watch_tells() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1), gpu_node("n2", 1)],
                              cluster=OtherBinderFirst())
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=16000)]))
    sched.pump()
    sched.schedule_one()
    uid = uid_of(cluster, "p")
    rec = sched.cache.pod(uid)
    assert rec is not None and rec.assumed and rec.node == "n1"  # counted twice is safe
    assert not cluster.events(name="p", reason="FailedScheduling")
    sched.pump()  # the watch shows where it is
    rec = sched.cache.pod(uid)
    assert rec is not None and not rec.assumed and rec.node == "n2"
    n1 = sched.cache.node_info("n1")
    assert n1 is not None and n1.usages[0].tasks == 0
