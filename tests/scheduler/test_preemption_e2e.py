"""Preemption with the whole scheduler on the in-memory cluster: victims evicted, the
preemptor nominated, its room held while the victims terminate, and the preemptor bound
once they are gone."""

from __future__ import annotations

import vgpu.annotations as ann
from tests.scheduler.e2e_support import allocated, gpu_node, node_of, uid_of
from tests.scheduler.helpers import FakeClock
from tests.scheduler.test_preemption_gpu import on_gpu
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config, SchedulerConfig
from vgpu_scheduler.host.scheduler import Scheduler

WHOLE = builders.container(percent=100)


class Kubelet(MemoryCluster):
    """Deleting a bound pod only marks it, as the API server does while the kubelet stops
    its containers; :meth:`finish` is the kubelet confirming."""

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        if kind == "pods":
            obj = self.get("pods", name, namespace)
            if obj["spec"].get("nodeName") and not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
                self.replace("pods", obj)
                return
        super().delete(kind, name, namespace)

    def finish(self, name: str) -> None:
        super().delete("pods", name, "default")


def start(cluster: MemoryCluster, *nodes: Obj) -> tuple[Scheduler, FakeClock]:
    clock = FakeClock()
    for n in nodes:
        cluster.create("nodes", n)
    # Parked pods are retried after 30 s, well within the nodes' heartbeat expiry.
    config = Config(scheduler=SchedulerConfig(pod_max_unschedulable_seconds=30))
    return Scheduler(config, cluster, clock=clock), clock


def messages(cluster: MemoryCluster, name: str, reason: str) -> list[str]:
    return [e.message for e in cluster.events(name=name, reason=reason)]


def status(cluster: MemoryCluster, name: str) -> Obj:
    result: Obj = cluster.get("pods", name, "default").get("status") or {}
    return result


def test_victims_are_evicted_and_the_preemptor_bound_once_they_are_gone() -> None:
    cluster = MemoryCluster()
    sched, clock = start(cluster, gpu_node("n1", 1))
    cluster.create("pods", builders.pod("low", [builders.container(gpumem=4000)], priority=0))
    sched.run_until_idle()
    allocated(cluster, "low")
    cluster.create("pods", builders.pod("high", [WHOLE], priority=100))
    sched.run_until_idle()
    assert "low" not in {p["metadata"]["name"] for p in cluster.list("pods").items}
    assert messages(cluster, "low", "Preempted") == [
        f"Preempted by pod {cluster.get('pods', 'high', 'default')['metadata']['uid']} "
        f"on node n1"]
    assert status(cluster, "high")["nominatedNodeName"] == "n1"
    assert messages(cluster, "high", "FailedScheduling") == [
        "0/1 nodes are available: 1 insufficient GPU memory. preemption: evicting 1 "
        "lower-priority pod(s) on node n1 (default/low); the pod is nominated there."]
    clock.advance(2)  # its backoff
    sched.run_until_idle()
    assert node_of(cluster, "high") == "n1"
    assignment = codecs.decode_assignment(
        cluster.get("pods", "high", "default")["metadata"]["annotations"][ann.ASSIGNMENT])
    assert assignment.containers["main"][0].memory_mib == 16384


def test_the_room_is_held_while_the_victims_terminate() -> None:
    cluster = Kubelet()
    sched, clock = start(cluster, gpu_node("n1", 1))
    cluster.create("pods", on_gpu("low", "n1", 0, 4000, priority=0))
    cluster.create("pods", builders.pod("high", [WHOLE], priority=100))
    sched.run_until_idle()
    low = cluster.get("pods", "low", "default")
    assert low["metadata"].get("deletionTimestamp")
    assert [c["reason"] for c in low["status"]["conditions"]
            if c["type"] == "DisruptionTarget"] == ["PreemptionByScheduler"]
    held = sched.cache.pod(uid_of(cluster, "high"))
    assert held is not None and held.nominated and held.assignment is not None
    assert held.assignment.containers["main"][0].uuid == "GPU-n1-0"

    # Retried while the victim terminates (nothing wakes it: the periodic retry of
    # parked pods): no second preemption, the room still held.
    clock.advance(31)
    sched.run_until_idle()
    assert node_of(cluster, "high") is None
    assert len(messages(cluster, "low", "Preempted")) == 1
    assert any("not eligible due to a terminating pod on the nominated node" in m
               for m in messages(cluster, "high", "FailedScheduling"))
    held = sched.cache.pod(uid_of(cluster, "high"))
    assert held is not None and held.nominated

    # The victim is gone; a lower-priority pod that arrives before the preemptor's next
    # attempt finds the room taken (and cannot take it: the nomination outranks it).
    cluster.finish("low")
    cluster.create("pods", builders.pod("mid", [WHOLE], priority=50))
    sched.run_until_idle()
    assert node_of(cluster, "mid") is None and node_of(cluster, "high") is None
    clock.advance(5)
    sched.run_until_idle()
    assert node_of(cluster, "high") == "n1"
    assert node_of(cluster, "mid") is None


def test_preemption_policy_never_evicts_nobody() -> None:
    cluster = MemoryCluster()
    sched, _ = start(cluster, gpu_node("n1", 1))
    cluster.create("pods", on_gpu("low", "n1", 0, 4000))
    cluster.create("pods", builders.pod("polite", [WHOLE], priority=100,
                                        preemptionPolicy="Never"))
    sched.run_until_idle()
    assert node_of(cluster, "low") == "n1" and node_of(cluster, "polite") is None
    assert messages(cluster, "polite", "FailedScheduling") == [
        "0/1 nodes are available: 1 insufficient GPU memory. preemption: not eligible due "
        "to preemptionPolicy=Never."]
    assert "nominatedNodeName" not in status(cluster, "polite")


def _ready(obj: Obj) -> Obj:
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return obj


def test_a_budget_refusal_disturbs_no_other_victim_and_is_retried() -> None:
    cluster = MemoryCluster()
    sched, clock = start(cluster, gpu_node("n1", 1))
    cluster.create("pods", _ready(on_gpu("guarded", "n1", 0, 4000, labels={"app": "db"})))
    cluster.create("pods", _ready(on_gpu("free", "n1", 0, 4000)))
    cluster.create("poddisruptionbudgets", {
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}})
    cluster.create("pods", builders.pod("high", [WHOLE], priority=100))
    sched.run_until_idle()
    # The budgeted victim is evicted first and refused: nobody is evicted.
    assert {node_of(cluster, "guarded"), node_of(cluster, "free")} == {"n1"}
    assert "nominatedNodeName" not in status(cluster, "high")
    assert messages(cluster, "high", "FailedScheduling") == [
        "0/1 nodes are available: 1 insufficient GPU memory. preemption: eviction of "
        "default/guarded on node n1 was refused by a PodDisruptionBudget; will retry."]
    assert sched.queue.counts()["backoff"] == 1
    # The budget allows a disruption now: the next attempt goes through.
    budget = cluster.get("poddisruptionbudgets", "db", "default")
    budget["status"]["disruptionsAllowed"] = 1
    cluster.replace("poddisruptionbudgets", budget)
    clock.advance(2)
    sched.run_until_idle()
    assert status(cluster, "high")["nominatedNodeName"] == "n1"
    clock.advance(5)
    sched.run_until_idle()
    assert node_of(cluster, "high") == "n1"


def test_a_higher_priority_pod_takes_over_a_lower_nomination() -> None:
    cluster = Kubelet()
    sched, clock = start(cluster, gpu_node("n1", 1))
    cluster.create("pods", on_gpu("low", "n1", 0, 4000, priority=0))
    cluster.create("pods", builders.pod("mid", [WHOLE], priority=50))
    sched.run_until_idle()
    assert status(cluster, "mid")["nominatedNodeName"] == "n1"
    cluster.create("pods", builders.pod("high", [WHOLE], priority=100))
    sched.run_until_idle()
    # No second eviction (low is already leaving); mid's nomination goes to high.
    assert len(messages(cluster, "low", "Preempted")) == 1
    assert status(cluster, "high")["nominatedNodeName"] == "n1"
    assert "nominatedNodeName" not in status(cluster, "mid")
    cluster.finish("low")
    clock.advance(5)
    sched.run_until_idle()
    assert node_of(cluster, "high") == "n1" and node_of(cluster, "mid") is None


def test_a_pod_its_pre_filters_turn_away_preempts_nobody() -> None:
    cluster = MemoryCluster()
    sched, _ = start(cluster, gpu_node("n1", 1))
    cluster.create("pods", on_gpu("low", "n1", 0, 4000))
    cluster.create("pods", builders.pod(
        "odd", [WHOLE], priority=100,
        annotations={"vgpu.io/gpu-scheduler-policy": "fragmentation-aware"}))
    sched.run_until_idle()
    assert node_of(cluster, "low") == "n1"
    assert messages(cluster, "odd", "FailedScheduling") == [
        "0/1 nodes are available: GPU policy 'fragmentation-aware' is not available. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."]
