"""NodeName, NodePorts, SchedulingGates, and the scores of NodeAffinity and TaintToleration,
as kube-scheduler's plugins (their reasons, weights and normalization)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.helpers import FakeClock
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import DEFAULT_SCHEDULER_PLUGINS, Config, SchedulerConfig
from vgpu_scheduler.framework.objects import Requirement, SelectorTerm, Taint, Toleration
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.helper.normalize_score import default_normalize
from vgpu_scheduler.plugins.kube import node_name
from vgpu_scheduler.plugins.kube.node_affinity import preferred_score
from vgpu_scheduler.plugins.kube.taint_toleration import intolerable_preferences

SOFT = Taint("spot", "true", "PreferNoSchedule")


@pytest.mark.parametrize(("requested", "node", "fits"), [
    (None, "a", True), ("a", "a", True), ("b", "a", False)])
def test_node_name(requested: str | None, node: str, fits: bool) -> None:
    assert node_name.fits(requested, node) is fits


@pytest.mark.parametrize(("scores", "reverse", "expected"), [
    ([0, 2, 4], False, [0, 50, 100]),
    ([1, 3], False, [33, 100]),  # integer arithmetic, as kube
    ([0, 0], False, [0, 0]),
    ([0, 0], True, [100, 100]),
    ([0, 1, 2], True, [100, 50, 0]),
])
def test_default_normalize(scores: list[float], reverse: bool, expected: list[int]) -> None:
    values = [float(s) for s in scores]
    default_normalize(values, reverse)
    assert values == [float(e) for e in expected]


ZONE_A = SelectorTerm((Requirement("zone", "In", ("a",)),))
FAST = SelectorTerm((Requirement("disk", "Exists"),))


@pytest.mark.parametrize(("labels", "expected"), [
    ({"zone": "a", "disk": "ssd"}, 15), ({"zone": "a"}, 10), ({"disk": "x"}, 5), ({}, 0)])
def test_preferred_affinity_adds_the_weights_of_matching_terms(labels: dict[str, str],
                                                               expected: int) -> None:
    assert preferred_score(labels, "n", ((10, ZONE_A), (5, FAST))) == expected


@pytest.mark.parametrize(("taints", "tolerations", "count"), [
    ((SOFT,), (), 1),
    ((SOFT, Taint("x", "", "PreferNoSchedule")), (), 2),
    ((SOFT,), (Toleration("spot", "Equal", "true", "PreferNoSchedule"),), 0),
    ((SOFT,), (Toleration("spot", "Exists"),), 0),  # no effect: tolerates every effect
    # A NoSchedule toleration does not tolerate a PreferNoSchedule taint.
    ((SOFT,), (Toleration("spot", "Exists", "", "NoSchedule"),), 1),
    ((Taint("hard", "", "NoSchedule"),), (), 0),  # the filter's business, not the score's
])
def test_intolerable_preferences(taints: tuple[Taint, ...],
                                 tolerations: tuple[Toleration, ...], count: int) -> None:
    assert intolerable_preferences(taints, tolerations) == count


#: The default profile less the allocation gate: no node agent runs here to let the next
#: GPU pod of a node through.
PROFILE = Config(scheduler=SchedulerConfig(
    plugins=tuple(p for p in DEFAULT_SCHEDULER_PLUGINS if p != "AllocationGate")))


CLOCK = FakeClock()


def cluster_of(*nodes: dict[str, Any]) -> tuple[Scheduler, MemoryCluster]:
    cluster = MemoryCluster()
    for node in nodes:
        cluster.create("nodes", node)
    return Scheduler(PROFILE, cluster, clock=CLOCK), cluster


def gpu_node(name: str, **kw: Any) -> dict[str, Any]:
    return builders.node(name, builders.devices(name, 2), heartbeat=FakeClock().now, **kw)


def node_of(cluster: MemoryCluster, pod: str) -> str | None:
    found: str | None = cluster.get("pods", pod, "default")["spec"].get("nodeName")
    return found


def with_port(name: str, port: int) -> dict[str, Any]:
    pod = builders.pod(name, [builders.container(gpus=1, gpumem=100)])
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return pod


def test_two_pods_with_one_host_port_never_share_a_node() -> None:
    sched, cluster = cluster_of(gpu_node("n1"), gpu_node("n2"))
    for name in ("a", "b", "c"):
        cluster.create("pods", with_port(name, 8080))
        sched.run_until_idle()
    placed = [node_of(cluster, n) for n in ("a", "b")]
    assert sorted(p for p in placed if p) == ["n1", "n2"]
    assert node_of(cluster, "c") is None
    [event] = cluster.events(name="c")
    assert "2 node(s) didn't have free ports for the requested pod ports" in event.message
    cluster.delete("pods", "a", "default")
    CLOCK.advance(10)  # past the failed attempt's backoff
    sched.run_until_idle()  # the freed port wakes the parked pod
    assert node_of(cluster, "c") == placed[0]


def test_preferred_node_affinity_and_soft_taints_steer_the_node() -> None:
    sched, cluster = cluster_of(gpu_node("plain"), gpu_node("spot", taints=[
        {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
        gpu_node("ssd", labels={"disk": "ssd"}))
    pod = builders.pod("likes-ssd", [builders.container(gpus=1, gpumem=100)])
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    cluster.create("pods", pod)
    sched.run_until_idle()
    assert node_of(cluster, "likes-ssd") == "ssd"
    for i in range(4):  # none of these lands on the soft-tainted node while others fit
        cluster.create("pods", builders.pod(f"p{i}", [builders.container(gpus=1,
                                                                          gpumem=100)]))
        sched.run_until_idle()
        assert node_of(cluster, f"p{i}") in ("plain", "ssd")


def test_the_default_profile_holds_gated_pods() -> None:
    sched, cluster = cluster_of(gpu_node("n1"))
    pod = builders.pod("p", [builders.container(gpus=1, gpumem=100)])
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    cluster.create("pods", pod)
    sched.run_until_idle()
    assert node_of(cluster, "p") is None and sched.queue.gated() == 1
    assert not cluster.events(name="p")  # a gated pod is not a scheduling failure
    obj = cluster.get("pods", "p", "default")
    obj["spec"]["schedulingGates"] = []
    cluster.replace("pods", obj)
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n1"


def test_a_sidecar_takes_its_gpu_slice_and_cpu_beside_the_app() -> None:
    sched, cluster = cluster_of(gpu_node("n1", cpu="4"))
    sidecar = {**builders.container("proxy", gpus=1, gpumem=500, cpu="1"),
               "restartPolicy": "Always"}
    pod = builders.pod("p", [builders.container("app", gpus=1, gpumem=1000, cpu="2")],
                       init_containers=[sidecar])
    cluster.create("pods", pod)
    sched.run_until_idle()
    annotations = cluster.get("pods", "p", "default")["metadata"]["annotations"]
    assignment = codecs.decode_assignment(annotations["vgpu.io/assignment"])
    assert {n: [g.memory_mib for g in gs] for n, gs in assignment.containers.items()} == {
        "proxy": [500], "app": [1000]}
    info = sched.cache.node_info("n1")
    assert info is not None and info.requested_cpu == 3000  # 1 + 2, not max(1, 2)
    # One more CPU fits; two more do not: the sidecar's CPU really counts.
    for name, cpu in (("big", "2"), ("small", "1")):
        cluster.create("pods", builders.pod(name, [builders.container(gpus=None, cpu=cpu)]))
        sched.run_until_idle()
    assert node_of(cluster, "small") == "n1" and node_of(cluster, "big") is None
