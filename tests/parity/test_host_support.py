"""What the host gives the parity plugins: the pods on each node, nominations, gated pods,
listers of other kinds, and the API's eviction and status subresources."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.helpers import FakeClock
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu.errors import EvictionRefusedError, NotFoundError
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.framework.status import SUCCESS, Status, unschedulable
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.registry import REGISTRY

NOW = 1_800_000_000.0


def bound(name: str, node: str, cpu: str = "1", **labels: str) -> dict[str, Any]:
    pod = builders.pod(name, [builders.container(gpus=None, cpu=cpu)])
    pod["metadata"]["labels"] = dict(labels)
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def test_node_info_lists_its_pods_and_derives_the_same_totals() -> None:
    cache = Cache()
    cache.set_node(builders.node("n1", builders.devices("n1", 1), heartbeat=NOW), NOW)
    cache.set_pod(bound("a", "n1", "1", app="web"))
    cache.set_pod(bound("b", "n1", "2"))
    info = cache.node_info("n1")
    assert info is not None and set(info.pods) == {"default/a", "default/b"}
    assert info.pods["default/a"].info.labels == {"app": "web"}
    again = NodeInfo.of(info.static, 1.0, info.pods)
    assert (again.requested_cpu, again.pod_count) == (info.requested_cpu, 2) == (3000, 2)
    cache.set_pod({**bound("a", "n1", "1", app="db")})  # a label change reaches the node
    info = cache.node_info("n1")
    assert info is not None and info.pods["default/a"].info.labels == {"app": "db"}
    cache.remove_pod("default/b")
    info = cache.node_info("n1")
    assert info is not None and set(info.pods) == {"default/a"} and info.requested_cpu == 1000


def test_a_nomination_holds_room_until_cleared_and_never_replaces_a_placement() -> None:
    cache = Cache()
    cache.set_node(builders.node("n1", builders.devices("n1", 1), heartbeat=NOW), NOW)
    pending = parse(builders.pod("p", [builders.container(gpus=None, cpu="4")]), Config())
    claim = codecs.Assignment("n1", {"main": (codecs.GrantedDevice("GPU-n1-0", 100, 10),)})
    cache.nominate(pending, "n1", claim)
    info = cache.node_info("n1")
    assert info is not None and info.requested_cpu == 4000 and info.usages[0].tasks == 1
    # The watch shows the pod still pending: the nomination stays.
    cache.set_pod(builders.pod("p", [builders.container(gpus=None, cpu="4")]))
    assert cache.pod("default/p") is not None
    assert cache.clear_nomination("default/p") is not None
    info = cache.node_info("n1")
    assert info is not None and info.requested_cpu == 0 and info.usages[0].tasks == 0
    cache.assume(pending, "n1")
    cache.nominate(pending, "n1", claim)  # assumed already: nothing changes
    record = cache.pod("default/p")
    assert record is not None and record.assumed and not record.nominated


class Gate:
    name = "Gate"

    def __init__(self, handle: Any) -> None:
        self.events: list[ClusterEvent] = []
        handle.lister("persistentvolumeclaims")

    def pre_enqueue(self, pod: PodInfo) -> Status:
        return unschedulable("gated") if pod.gates else SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return unschedulable("blocked") if "blocked" in pod.labels else SUCCESS

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        self.events.append(event)
        return True


def gated_scheduler() -> tuple[Scheduler, MemoryCluster, Gate]:
    cluster = MemoryCluster()
    cluster.create("nodes", builders.node("n1", builders.devices("n1", 1),
                                          heartbeat=FakeClock().now))
    config = Config(scheduler=SchedulerConfig(
        plugins=("PrioritySort", "Gate", "NodeResourcesFit", "VGPU", "VGPUBinder")))
    sched = Scheduler(config, cluster, clock=FakeClock(), registry={**REGISTRY, "Gate": Gate})
    [gate] = [p for p in sched.framework.plugins if isinstance(p, Gate)]
    return sched, cluster, gate


def test_a_gated_pod_is_never_tried_until_its_last_gate_goes() -> None:
    sched, cluster, _ = gated_scheduler()
    pod = builders.pod("p", [builders.container(gpus=1, gpumem=100)])
    pod["spec"]["schedulingGates"] = [{"name": "a"}, {"name": "b"}]
    cluster.create("pods", pod)
    sched.run_until_idle()
    assert sched.queue.gated() == 1 and not cluster.events(name="p")
    assert cluster.get("pods", "p", "default")["spec"].get("nodeName") is None
    for gates in ([{"name": "b"}], []):
        obj = cluster.get("pods", "p", "default")
        obj["spec"]["schedulingGates"] = gates
        cluster.replace("pods", obj)
        sched.run_until_idle()
    assert sched.queue.gated() == 0
    assert cluster.get("pods", "p", "default")["spec"].get("nodeName") == "n1"


def test_other_kinds_are_watched_and_their_changes_wake_pods() -> None:
    sched, cluster, gate = gated_scheduler()
    sched.run_until_idle()
    cluster.create("persistentvolumeclaims", {"metadata": {"name": "c", "namespace": "ns"}})
    # Nothing waits, so nothing is woken; but the lister sees the claim.
    sched.run_until_idle()
    assert sched.framework.lister("persistentvolumeclaims").get("ns/c") is not None
    blocked = builders.pod("p", [builders.container(gpus=1, gpumem=100)])
    blocked["metadata"]["labels"] = {"blocked": "yes"}
    cluster.create("pods", blocked)
    sched.run_until_idle()  # the gate's filter refuses it: parked
    cluster.create("persistentvolumeclaims", {"metadata": {"name": "d", "namespace": "ns"}})
    sched.run_until_idle()
    assert any(e.resource == "persistentvolumeclaims" and e.action == "add"
               for e in gate.events)


def budget(name: str, allowed: int, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed}}


def test_eviction_honours_disruption_budgets_and_status_patches_merge() -> None:
    cluster = MemoryCluster()
    cluster.create("pods", bound("a", "n1", app="web"))
    cluster.create("pods", bound("b", "n1", app="web"))
    cluster.create("pods", bound("c", "n1", app="db"))
    cluster.create("poddisruptionbudgets", budget("web", 1, app="web"))
    cluster.evict("default", "a")
    with pytest.raises(EvictionRefusedError, match="disruption budget web"):
        cluster.evict("default", "b")
    assert cluster.get("poddisruptionbudgets", "web", "default")["status"][
        "disruptionsAllowed"] == 0
    cluster.evict("default", "c")  # no budget selects it
    with pytest.raises(NotFoundError):
        cluster.evict("default", "a")
    patched = cluster.patch_status("pods", "b", {"nominatedNodeName": "n2"}, "default")
    assert patched["status"]["nominatedNodeName"] == "n2"
    assert patched["status"]["phase"] == "Running"
    cluster.patch_status("pods", "b", {"nominatedNodeName": None}, "default")
    assert "nominatedNodeName" not in cluster.get("pods", "b", "default")["status"]


def test_framework_runs_prefilter_extensions_only_for_plugins_whose_prefilter_ran() -> None:
    calls: list[str] = []

    class Ext:
        def __init__(self, name: str) -> None:
            self.name = name

        def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                    node: NodeInfo) -> Status:
            calls.append(f"add {self.name}")
            return SUCCESS

        def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                       node: NodeInfo) -> Status:
            calls.append(f"remove {self.name}")
            return SUCCESS

    from vgpu_scheduler.framework.runtime import Framework
    fw = Framework([Ext("A"), Ext("B")])
    state = CycleState(NOW)
    state.skip_filter.add("B")
    clone = state.clone()
    clone.write("k", 1)
    assert state.read("k") is None and clone.skip_filter == {"B"}
    info = parse(builders.pod("p"), Config())
    fw.remove_pod(clone, info, NodePod(info), _empty_node())
    fw.add_pod(clone, info, NodePod(info), _empty_node())
    assert calls == ["remove A", "add A"]


def _static() -> Any:
    from vgpu_scheduler.framework.nodeinfo import parse_node
    return parse_node(builders.node("x"))


def _empty_node() -> NodeInfo:
    return NodeInfo.of(_static(), 1.0, {})
