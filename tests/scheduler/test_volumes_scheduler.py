"""The volume plugins in the whole scheduler on the in-memory cluster: WaitForFirstConsumer
claims provisioned where the pod goes (stepping and threaded), static PVs bound, zonal
PVs, Immediate claims waiting for the PV controller, the PreBind timeout, and claims one
pod or a few per node may use."""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.scheduler.e2e_support import gpu_node, node_of, setup, uid_of
from tests.support import volumes as vol
from tests.support.fakeagent import FakeAgents
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.helper.volume_objects import SELECTED_NODE

ZONE = vol.ZONE


def config(timeout: float = 10.0, **kw: Any) -> Config:
    return Config(scheduler=SchedulerConfig(volume_bind_timeout_seconds=timeout,
                                            volume_bind_poll_seconds=0.01, **kw))


def zonal_nodes() -> list[Any]:
    return [gpu_node("n-a", 4, labels={ZONE: "a"}), gpu_node("n-b", 4, labels={ZONE: "b"})]


def zoned_class() -> dict[str, Any]:
    return vol.storage_class("zoned", topologies=[{ZONE: ["b"]}])


def messages(cluster: MemoryCluster, pod: str, reason: str = "FailedScheduling") -> list[str]:
    return [e.message for e in cluster.events(name=pod, reason=reason)]


def claim_of(cluster: MemoryCluster, name: str) -> dict[str, Any]:
    claim: dict[str, Any] = cluster.get("persistentvolumeclaims", name, "default")
    return claim


def test_wait_for_first_consumer_claim_is_provisioned_where_the_pod_goes() -> None:
    sched, cluster, _ = setup(zonal_nodes(), config())
    cluster.create("storageclasses", zoned_class())
    cluster.create("persistentvolumeclaims", vol.pvc("data", "zoned"))
    cluster.create("pods", vol.claim_pod("p", "data"))
    with vol.FakeProvisioner(cluster) as provisioner:
        sched.run_until_idle()
    assert node_of(cluster, "p") == "n-b"  # the only zone the class allows
    claim = claim_of(cluster, "data")
    assert claim["metadata"]["annotations"][SELECTED_NODE] == "n-b"
    assert claim["spec"]["volumeName"] == provisioner.provisioned["data"]
    assert not messages(cluster, "p", "FailedScheduling")


def test_the_threaded_scheduler_binds_after_the_provisioner_on_its_bind_workers() -> None:
    sched, cluster, _ = setup(zonal_nodes(), config(bind_workers=2))
    cluster.create("storageclasses", zoned_class())
    for i in range(3):
        cluster.create("persistentvolumeclaims", vol.pvc(f"data-{i}", "zoned"))
        cluster.create("pods", vol.claim_pod(f"p{i}", f"data-{i}"))
    stop = threading.Event()
    loop = threading.Thread(target=sched.run, args=(stop,), kwargs={"watch_timeout": 0.2})
    # The node agents' part: each pod bound is allocated, which opens its node's gate.
    with vol.FakeProvisioner(cluster), FakeAgents(cluster, "default"):
        loop.start()
        try:
            deadline = time.monotonic() + 20
            while any(node_of(cluster, f"p{i}") is None for i in range(3)):
                assert time.monotonic() < deadline, "pods not bound"
                time.sleep(0.02)
        finally:
            stop.set()
            loop.join(10)
    assert {node_of(cluster, f"p{i}") for i in range(3)} == {"n-b"}


def test_static_volumes_are_bound_smallest_fit_on_their_nodes() -> None:
    nodes = [gpu_node("n1"), gpu_node("n2")]
    sched, cluster, _ = setup(nodes, config())
    cluster.create("storageclasses", vol.storage_class(
        "local", provisioner="kubernetes.io/no-provisioner"))
    host = vol.HOSTNAME
    cluster.create("persistentvolumes", vol.pv("big-n1", "local", capacity="100Gi",
                                               on={host: ["n1"]}))
    cluster.create("persistentvolumes", vol.pv("small-n2", "local", capacity="5Gi",
                                               on={host: ["n2"]}))
    cluster.create("persistentvolumeclaims", vol.pvc("first", "local", request="50Gi"))
    cluster.create("persistentvolumeclaims", vol.pvc("second", "local", request="1Gi"))
    cluster.create("pods", vol.claim_pod("p1", "first"))
    cluster.create("pods", vol.claim_pod("p2", "second"))
    with vol.FakeProvisioner(cluster) as controller:
        sched.run_until_idle()
    assert (node_of(cluster, "p1"), node_of(cluster, "p2")) == ("n1", "n2")
    assert claim_of(cluster, "first")["spec"]["volumeName"] == "big-n1"
    assert claim_of(cluster, "second")["spec"]["volumeName"] == "small-n2"
    assert controller.provisioned == {}  # nothing was provisioned
    pv = cluster.get("persistentvolumes", "small-n2")
    assert pv["spec"]["claimRef"]["uid"] == claim_of(cluster, "second")["metadata"]["uid"]
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"


def test_a_zonal_volume_takes_its_pod_to_its_zone() -> None:
    sched, cluster, _ = setup([gpu_node("n-a", labels={ZONE: "a"}),
                               gpu_node("n-b", labels={ZONE: "b"}),
                               gpu_node("n-c", labels={ZONE: "c"})], config())
    cluster.create("storageclasses", vol.storage_class("disk"))
    cluster.create("persistentvolumes", vol.pv("zonal", "disk", on={ZONE: ["c"]},
                                               labels={ZONE: "c"}, phase="Bound"))
    cluster.create("persistentvolumeclaims", vol.pvc("data", "disk", volume="zonal",
                                                     bound=True))
    cluster.create("pods", vol.claim_pod("p", "data"))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n-c"
    # With its zone gone, the pod has nowhere to go, and says why.
    cluster.create("pods", vol.claim_pod("q", "data", nodeSelector={ZONE: "a"}))
    sched.run_until_idle()
    assert node_of(cluster, "q") is None
    assert "1 node(s) had volume node affinity conflict" in messages(cluster, "q")[-1]


def test_an_unbound_immediate_claim_waits_for_the_pv_controller() -> None:
    sched, cluster, clock = setup(zonal_nodes(), config())
    cluster.create("storageclasses", vol.storage_class("now", mode="Immediate"))
    cluster.create("persistentvolumeclaims", vol.pvc("data", "now"))
    cluster.create("pods", vol.claim_pod("p", "data"))
    sched.run_until_idle()
    assert node_of(cluster, "p") is None
    assert messages(cluster, "p") == [
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        " preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."]
    # The PV controller binds it: the claim's update wakes the pod.
    cluster.create("persistentvolumes", vol.pv("pv", "now", phase="Bound"))
    claim = claim_of(cluster, "data")
    claim["spec"]["volumeName"] = "pv"
    claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    cluster.replace("persistentvolumeclaims", claim)
    clock.advance(2)  # past the first backoff
    sched.run_until_idle()
    assert node_of(cluster, "p") is not None


def test_a_claim_not_bound_in_time_sends_the_pod_back_with_the_reason() -> None:
    sched, cluster, clock = setup(zonal_nodes(), config(timeout=0.2))
    cluster.create("storageclasses", zoned_class())
    cluster.create("persistentvolumeclaims", vol.pvc("data", "zoned"))
    cluster.create("pods", vol.claim_pod("p", "data"))
    sched.run_until_idle()  # no provisioner: PreBind times out
    assert node_of(cluster, "p") is None
    assert messages(cluster, "p") == [
        'running PreBind plugin "VolumeBinding": binding volumes: timed out after 0.2s '
        "waiting for PersistentVolumeClaim(s) default/data to be bound"]
    assert sched.queue.get(uid_of(cluster, "p")) is not None  # backing off, not lost
    assert sched.cache.pod(uid_of(cluster, "p")) is None  # the reservation was undone
    # The claim keeps its node, as in kube: the provisioner may be at work.
    assert claim_of(cluster, "data")["metadata"]["annotations"][SELECTED_NODE] == "n-b"
    with vol.FakeProvisioner(cluster):
        clock.advance(2)
        sched.run_until_idle()
    assert node_of(cluster, "p") == "n-b"


def test_a_provisioner_refusing_the_node_fails_the_binding_and_frees_the_claim() -> None:
    sched, cluster, _clock = setup(zonal_nodes(), config())
    cluster.create("storageclasses", vol.storage_class("any"))
    cluster.create("persistentvolumeclaims", vol.pvc("data", "any"))
    cluster.create("persistentvolumeclaims", vol.pvc("more", "any", annotations={"x": "y"}))
    cluster.create("pods", vol.claim_pod("p", "data", nodeSelector={ZONE: "a"}))
    cluster.create("pods", vol.claim_pod("q", "more", nodeSelector={ZONE: "a"}))
    with vol.FakeProvisioner(cluster, refuse=["n-a"]):
        sched.run_until_idle()
    assert node_of(cluster, "p") is None and node_of(cluster, "q") is None
    prefix = 'running PreBind plugin "VolumeBinding": binding volumes: '
    # Without the annotation the claim has none left: kube says so in other words.
    assert messages(cluster, "p") == [prefix + 'selectedNode annotation reset for PVC "data"']
    assert messages(cluster, "q") == [prefix + 'provisioning failed for PVC "more"']
    for claim in ("data", "more"):
        assert SELECTED_NODE not in claim_of(cluster, claim)["metadata"]["annotations"]
    assert sched.queue.get(uid_of(cluster, "p")) is not None  # backing off: any node may do now


def test_deleting_a_pod_while_its_volumes_bind_abandons_the_binding() -> None:
    sched, cluster, _ = setup(zonal_nodes(), config())
    cluster.create("storageclasses", zoned_class())
    cluster.create("persistentvolumeclaims", vol.pvc("data", "zoned"))
    cluster.create("pods", vol.claim_pod("p", "data"))
    uid = uid_of(cluster, "p")

    def delete_when_asked() -> None:
        deadline = time.monotonic() + 10
        while SELECTED_NODE not in claim_of(cluster, "data")["metadata"]["annotations"]:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        cluster.delete("pods", "p", "default")

    deleter = threading.Thread(target=delete_when_asked)
    deleter.start()
    sched.run_until_idle()
    deleter.join()
    assert "pod does not exist any more" in messages(cluster, "p")[0]
    assert sched.queue.get(uid) is None and sched.cache.pod(uid) is None


def test_a_read_write_once_pod_claim_serves_one_pod_at_a_time() -> None:
    sched, cluster, clock = setup(zonal_nodes(), config())
    cluster.create("storageclasses", vol.storage_class("disk"))
    cluster.create("persistentvolumes", vol.pv("pv", "disk", phase="Bound",
                                               modes=["ReadWriteOncePod"]))
    cluster.create("persistentvolumeclaims", vol.pvc("solo", "disk", volume="pv", bound=True,
                                                     modes=["ReadWriteOncePod"]))
    cluster.create("pods", vol.claim_pod("first", "solo"))
    sched.run_until_idle()
    cluster.create("pods", vol.claim_pod("second", "solo"))
    sched.run_until_idle()
    assert node_of(cluster, "first") is not None and node_of(cluster, "second") is None
    assert messages(cluster, "second") == [
        "0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same "
        "name and ReadWriteOncePod access mode. preemption: 0/2 nodes are available: 2 No "
        "preemption victims found for incoming pod."]
    cluster.delete("pods", "first", "default")
    clock.advance(2)
    sched.run_until_idle()
    assert node_of(cluster, "second") is not None


def test_a_node_at_its_csi_attach_limit_takes_no_more_volumes() -> None:
    sched, cluster, _ = setup([gpu_node("n1")], config())
    cluster.create("csinodes", {"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": vol.PROVISIONER, "nodeID": "n1", "allocatable": {"count": 1}}]}})
    cluster.create("storageclasses", vol.storage_class("csi"))
    for name in ("a", "b"):
        cluster.create("persistentvolumes", vol.pv(f"pv-{name}", "csi", phase="Bound",
                                                   csi=(vol.PROVISIONER, f"h-{name}")))
        cluster.create("persistentvolumeclaims", vol.pvc(name, "csi", volume=f"pv-{name}",
                                                         bound=True))
        cluster.create("pods", vol.claim_pod(f"p-{name}", name))
        sched.run_until_idle()
    assert node_of(cluster, "p-a") == "n1" and node_of(cluster, "p-b") is None
    assert messages(cluster, "p-b") == [
        "0/1 nodes are available: 1 node(s) exceed max volume count."
        " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming"
        " pod."]


def test_pods_without_claims_never_watch_for_storage_in_vain() -> None:
    # The volume plugins skip such pods; their informers exist but cost no decision.
    sched = Scheduler(config(), MemoryCluster())
    kinds = {i.kind for i in sched.informers()}
    assert {"persistentvolumes", "persistentvolumeclaims", "storageclasses",
            "csinodes"} <= kinds
