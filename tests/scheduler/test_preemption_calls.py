"""What a preemption asks of the API server, in what order (the pure plan of
``default_preemption.calls``), and how the carrier sends it: per victim no more calls
than kube-scheduler makes (one eviction for its DELETE, a condition only where the server
knows it, one event), the preemptor nominated last, a failure taking the nomination back."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.scheduler.helpers import FakeClock
from tests.scheduler.preemption_support import HIGH, LOW, MID, pod
from vgpu.cluster.fence import FencedError
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.errors import ClusterError
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.plugins.kube.default_preemption.calls import (
    Nominate,
    Plan,
    plan,
)
from vgpu_scheduler.plugins.kube.default_preemption.evict import Carrier
from vgpu_scheduler.plugins.kube.default_preemption.started import Started, StartedPreemptions
from vgpu_scheduler.plugins.kube.default_preemption.victims import Candidate, Victim


def _victim(name: str, priority: int = LOW, *, grace: int | None = None,
            phase: str = "Running", deleting: bool = False) -> Victim:
    obj = pod(name, priority, on="n1")
    obj["metadata"]["uid"] = f"uid-{name}"
    obj["status"]["phase"] = phase
    if grace is not None:
        obj["spec"]["terminationGracePeriodSeconds"] = grace
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return Victim(NodePod(parse(obj, Config())), obj, 0.0)


def _pending(name: str, priority: int) -> PodInfo:
    obj = pod(name, priority)
    obj["metadata"]["uid"] = f"uid-{name}"
    return parse(obj, Config())


P = _pending("p", HIGH)
V1, V2, V3 = _victim("v1", MID), _victim("v2"), _victim("v3")
GRACELESS, ENDED = _victim("quick", grace=0), _victim("done", phase="Succeeded")
LEAVING = _victim("leaving", deleting=True)
D = _pending("d", LOW)


def _candidate(*victims: Victim, breaking: tuple[str, ...] = (),
               displaced: tuple[PodInfo, ...] = ()) -> Candidate:
    return Candidate("n1", victims, frozenset(breaking),
                     tuple(NodePod(d, nominated=True) for d in displaced),
                     cast(NodeInfo, None))


def _names(p: Plan) -> tuple[list[str], list[str]]:
    def name(call: Any) -> str:
        target = call.pod.name if isinstance(call, Nominate) else call.victim.info.name
        extra = f"->{call.node}" if isinstance(call, Nominate) else ""
        return f"{type(call).__name__} {target}{extra}"
    return [name(c) for c in p.calls], [name(c) for c in p.on_failure]


@pytest.mark.parametrize(("candidate", "nominated", "conditions", "calls", "undo"), [
    # An API server before 1.26 (kube-scheduler v1.20's calls: a DELETE and an event per
    # victim, the preemptor's status PATCH).
    (_candidate(V1, V2, V3), None, False,
     ["Evict v1", "Announce v1", "Evict v2", "Announce v2", "Evict v3", "Announce v3",
      "Nominate p->n1"], []),
    # 1.26 on: the condition just after each eviction (which overwrites one set before).
    (_candidate(V1, V2), None, True,
     ["Evict v1", "Mark v1", "Announce v1", "Evict v2", "Mark v2", "Announce v2",
      "Nominate p->n1"], []),
    # Gone at once: nothing left to mark.
    (_candidate(GRACELESS, ENDED), None, True,
     ["Evict quick", "Announce quick", "Evict done", "Announce done", "Nominate p->n1"], []),
    # A victim that would break a budget first; one already leaving needs no call.
    (_candidate(V1, LEAVING, V3, breaking=("default/v3",)), None, False,
     ["Evict v3", "Announce v3", "Evict v1", "Announce v1", "Nominate p->n1"], []),
    # The nominations it takes over are cleared first.
    (_candidate(V1, displaced=(D,)), None, False,
     ["Nominate d->None", "Evict v1", "Announce v1", "Nominate p->n1"], []),
    # Already nominated there (its last preemption): nothing to set; a failure clears it.
    (_candidate(V1), "n1", False, ["Evict v1", "Announce v1"], ["Nominate p->None"]),
    (_candidate(V1), "n2", False, ["Evict v1", "Announce v1", "Nominate p->n1"],
     ["Nominate p->None"]),
], ids=["before 1.26", "1.26 on", "no grace period", "budget first, leaving skipped",
        "displaced", "nominated there already", "nominated elsewhere"])
def test_the_calls_of_a_preemption(candidate: Candidate, nominated: str | None,
                                   conditions: bool, calls: list[str],
                                   undo: list[str]) -> None:
    assert _names(plan(P, candidate, nominated=nominated, conditions=conditions)) == (
        calls, undo)


# -- the carrier ---------------------------------------------------------------------------


class Recording(MemoryCluster):
    """The in-memory cluster, remembering each preemption call; a pod deleted while bound
    terminates (as with a kubelet) until :meth:`finish`; ``fail`` makes evictions of
    those names fail."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[str] = []
        self.fail: dict[str, ClusterError | FencedError] = {}

    def evict(self, namespace: str, name: str, *, uid: str = "") -> None:
        self.calls.append(f"evict {name}")
        if name in self.fail:
            raise self.fail[name]
        super().evict(namespace, name, uid=uid)

    def delete(self, kind: Any, name: str, namespace: str | None = None) -> None:
        if kind == "pods":
            obj = self.get("pods", name, namespace)
            if obj["spec"].get("nodeName") and not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
                self.replace("pods", obj)
                return
        super().delete(kind, name, namespace)

    def patch_status(self, kind: Any, name: str, status: Any,
                     namespace: str | None = None) -> Obj:
        self.calls.append(f"status {name} {status}")
        return super().patch_status(kind, name, status, namespace)

    def patch_annotations(self, kind: Any, name: str, annotations: Any,
                          namespace: str | None = None, resource_version: str | None = None,
                          **kwargs: Any) -> Obj:
        self.calls.append(f"condition {name} "
                          f"{[c['reason'] for c in kwargs.get('conditions', ())]}")
        return super().patch_annotations(kind, name, annotations, namespace,
                                         resource_version, **kwargs)

    def record_event(self, obj: Obj, event_type: Any, reason: str, message: str,
                     component: str) -> None:
        self.calls.append(f"event {obj['metadata']['name']} {reason}")
        super().record_event(obj, event_type, reason, message, component)


def _carry(cluster: Recording, candidate: Candidate, *, nominated: str | None = None
           ) -> str | None:
    for obj in (P.pod, *(v.obj for v in candidate.victims)):
        cluster.create("pods", obj)
    carrier = Carrier(cluster, P, "n1", scheduler_name="vgpu-scheduler", clock=FakeClock())
    return carrier.run(plan(P, candidate, nominated=nominated,
                            conditions=cluster.pod_disruption_conditions()))


def test_victims_are_marked_preempted_over_the_evictions_own_condition() -> None:
    cluster = Recording()
    assert _carry(cluster, _candidate(V1, V2)) is None
    assert cluster.calls == [
        "evict v1", "condition v1 ['PreemptionByScheduler']", "event v1 Preempted",
        "evict v2", "condition v2 ['PreemptionByScheduler']", "event v2 Preempted",
        "status p {'nominatedNodeName': 'n1'}"]
    for name in ("v1", "v2"):
        obj = cluster.get("pods", name, "default")
        assert obj["metadata"]["deletionTimestamp"]
        assert [(c["reason"], c["message"]) for c in obj["status"]["conditions"]
                if c["type"] == "DisruptionTarget"] == [
            ("PreemptionByScheduler",
             "vgpu-scheduler: preempting to accommodate a higher priority pod")]


def test_before_1_26_a_victim_costs_an_eviction_and_an_event() -> None:
    cluster = Recording(disruption_conditions=False)
    assert _carry(cluster, _candidate(V1, V2, V3)) is None
    assert cluster.calls == ["evict v1", "event v1 Preempted", "evict v2",
                             "event v2 Preempted", "evict v3", "event v3 Preempted",
                             "status p {'nominatedNodeName': 'n1'}"]
    assert not [c for c in cluster.get("pods", "v1", "default")["status"]["conditions"]
                if c["type"] == "DisruptionTarget"]


def test_a_failed_eviction_stops_the_preemption_and_takes_the_nomination_back() -> None:
    cluster = Recording(disruption_conditions=False)
    cluster.fail["v2"] = ClusterError("evict pod default/v2: etcd timed out (HTTP 500)")
    failure = _carry(cluster, _candidate(V1, V2, V3), nominated="n1")
    assert failure == ("preemption: evicting default/v2 failed: evict pod default/v2: etcd "
                       "timed out (HTTP 500)")
    assert cluster.calls == ["evict v1", "event v1 Preempted", "evict v2",
                             "status p {'nominatedNodeName': None}"]
    assert "deletionTimestamp" not in cluster.get("pods", "v3", "default")["metadata"]


def test_a_victim_already_gone_needs_nothing_more() -> None:
    cluster = Recording()
    for obj in (P.pod, V1.obj):
        cluster.create("pods", obj)
    carrier = Carrier(cluster, P, "n1", scheduler_name="vgpu-scheduler", clock=FakeClock())
    # V2 was never created: its eviction answers 404.
    assert carrier.run(plan(P, _candidate(V2, V1), nominated=None, conditions=True)) is None
    assert cluster.calls == ["evict v2", "evict v1", "condition v1 ['PreemptionByScheduler']",
                             "event v1 Preempted", "status p {'nominatedNodeName': 'n1'}"]


# -- what the plugin remembers until the watch shows it ------------------------------------


def _seen_as(nominated: str | None = None, node: str | None = None) -> Obj:
    obj = pod("p", HIGH)
    obj["metadata"]["uid"] = "uid-p"
    if nominated is not None:
        obj["status"] = {"nominatedNodeName": nominated}
    if node is not None:
        obj["spec"]["nodeName"] = node
    return obj


@pytest.mark.parametrize(("old", "new", "kept"), [
    (_seen_as(), _seen_as(), True),                    # another change of the pending pod
    (_seen_as(), _seen_as("n2"), True),                # not the nomination recorded
    (_seen_as(), _seen_as("n1"), False),               # its nomination, the last call
    (_seen_as("n1"), _seen_as("n1"), True),            # shown before this preemption
    (_seen_as(), _seen_as(node="n3"), False),          # bound
    (_seen_as(), None, False),                         # deleted
], ids=["pending", "other node", "nominated", "nominated before", "bound", "deleted"])
def test_a_started_preemption_is_remembered_until_the_watch_shows_it(
        old: Obj, new: Obj | None, kept: bool) -> None:
    started = StartedPreemptions()
    started.record("uid-p", Started("n1", frozenset({"uid-v"})))
    started.seen(old, new)
    assert (started.get("uid-p") is not None) is kept


def test_a_fenced_replica_stops_sending_and_undoes_nothing() -> None:
    cluster = Recording(disruption_conditions=False)
    cluster.fail["v2"] = FencedError("evict pod default/v2: not sent, this replica's lease "
                                     "was not renewed within 10 s")
    failure = _carry(cluster, _candidate(V1, V2, V3), nominated="n2")
    assert failure == ("preemption: evict pod default/v2: not sent, this replica's lease "
                       "was not renewed within 10 s")
    # The nomination it showed is not cleared: that write would be refused too.
    assert cluster.calls == ["evict v1", "event v1 Preempted", "evict v2"]
