"""VolumeRestrictions: in-tree disks two pods of a node cannot share, and
ReadWriteOncePod claims one pod of the cluster can use (kube's volume_restrictions_test
disk-conflict and access-mode cases, in our words)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.volume_helpers import StorageHandle, node, pod, pre_filtered
from tests.support import volumes as vol
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.nodeinfo import NodePod
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube import volume_restrictions as vr


def disk(kind: str, read_only: bool = False, **fields: Any) -> dict[str, Any]:
    return {"name": "d", kind: {**fields, "readOnly": read_only}}


GCE = "gcePersistentDisk"
EBS = "awsElasticBlockStore"
RBD = "rbd"
ISCSI = "iscsi"


@pytest.mark.parametrize(("mine", "theirs", "conflict"), [
    (disk(GCE, pdName="a"), disk(GCE, pdName="a"), True),
    (disk(GCE, pdName="a"), disk(GCE, pdName="b"), False),
    (disk(GCE, True, pdName="a"), disk(GCE, pdName="a"), True),
    (disk(GCE, True, pdName="a"), disk(GCE, True, pdName="a"), False),
    (disk(EBS, True, volumeID="v"), disk(EBS, True, volumeID="v"), True),
    (disk(EBS, volumeID="v"), disk(EBS, volumeID="w"), False),
    (disk(ISCSI, iqn="iqn.a"), disk(ISCSI, iqn="iqn.a"), True),
    (disk(ISCSI, True, iqn="iqn.a"), disk(ISCSI, True, iqn="iqn.a"), False),
    (disk(ISCSI, iqn="iqn.a"), disk(ISCSI, iqn="iqn.b"), False),
    (disk(RBD, monitors=["m1", "m2"], pool="p", image="i"),
     disk(RBD, monitors=["m2", "m3"], pool="p", image="i"), True),
    (disk(RBD, monitors=["m1"], image="i"), disk(RBD, monitors=["m1"], pool="rbd",
                                                 image="i"), True),
    (disk(RBD, monitors=["m1"], pool="p", image="i"),
     disk(RBD, monitors=["m3"], pool="p", image="i"), False),
    (disk(RBD, monitors=["m1"], pool="p", image="i"),
     disk(RBD, monitors=["m1"], pool="q", image="i"), False),
    (disk(RBD, True, monitors=["m1"], image="i"), disk(RBD, True, monitors=["m1"], image="i"),
     False),
    (disk(GCE, pdName="a"), disk(EBS, volumeID="a"), False),
])
def test_disk_conflicts(mine: dict[str, Any], theirs: dict[str, Any], conflict: bool) -> None:
    assert vr.disk_conflict(mine, [theirs]) is conflict


def with_volumes(name: str, *volumes: dict[str, Any], namespace: str = "default") -> Obj:
    return builders.pod(name, namespace=namespace, volumes=list(volumes))


def test_a_node_whose_pod_holds_the_disk_is_refused() -> None:
    plugin = vr.VolumeRestrictions(StorageHandle())
    busy = node("busy", pods=[with_volumes("holder", disk(GCE, pdName="a"))])
    free = node("free", pods=[with_volumes("other", disk(GCE, pdName="b"))])
    info = pod(with_volumes("p", disk(GCE, pdName="a")))
    state, status = pre_filtered(plugin, info, busy, free)
    assert status.ok
    refused = plugin.filter(state, info, busy)
    assert (refused.code, refused.reasons) == (Code.UNSCHEDULABLE, (vr.DISK_CONFLICT,))
    assert plugin.filter(state, info, free).ok


RWOP = ("ReadWriteOncePod",)


def rwop_case(*pods_on_nodes: list[Obj], claim_modes: tuple[str, ...] = RWOP,
              claims: tuple[Obj, ...] = ()) -> tuple[Any, Any, Any, list[Any]]:
    handle = StorageHandle(vol.pvc("solo", "c", modes=claim_modes),
                           vol.pvc("solo", "c", modes=RWOP, namespace="other"), *claims)
    plugin = vr.VolumeRestrictions(handle)
    nodes = [node(f"n{i}", pods=pods) for i, pods in enumerate(pods_on_nodes)]
    info = pod(vol.claim_pod("p", "solo"))
    state, status = pre_filtered(plugin, info, *nodes)
    return plugin, info, (state, status), nodes


def test_a_read_write_once_pod_claim_in_use_anywhere_refuses_every_node() -> None:
    plugin, info, (state, status), nodes = rwop_case(
        [vol.claim_pod("user", "solo")], [])
    assert status.ok
    for n in nodes:
        got = plugin.filter(state, info, n)
        assert (got.code, got.reasons) == (Code.UNSCHEDULABLE, (vr.RWOP_CONFLICT,))


@pytest.mark.parametrize(("pods", "modes"), [
    pytest.param([], RWOP, id="unused"),
    pytest.param([vol.claim_pod("user", "solo", namespace="other")], RWOP,
                 id="same-name-in-another-namespace"),
    pytest.param([vol.claim_pod("user", "solo")], ("ReadWriteMany",), id="shareable-claim"),
    pytest.param([vol.claim_pod("p", "solo")], RWOP, id="the-pod-itself"),
])
def test_read_write_once_pod_without_conflict_skips(pods: list[Obj],
                                                   modes: tuple[str, ...]) -> None:
    _, _, (_, status), _ = rwop_case(pods, claim_modes=modes)
    assert status.code is Code.SKIP


def test_a_missing_claim_is_unresolvable() -> None:
    plugin = vr.VolumeRestrictions(StorageHandle())
    _, status = pre_filtered(plugin, pod(vol.claim_pod("p", "nope")), node("n1"))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == 'persistentvolumeclaim "nope" not found'


def test_removing_the_user_frees_the_claim_for_preemption() -> None:
    user = vol.claim_pod("user", "solo")
    plugin, info, (state, status), nodes = rwop_case([user])
    assert status.ok
    (victim,) = nodes[0].pods.values()
    trial = state.clone()
    assert plugin.remove_pod(trial, info, victim, nodes[0]).ok
    assert plugin.filter(trial, info, nodes[0]).ok
    # The original state is untouched; adding the pod back conflicts again.
    assert not plugin.filter(state, info, nodes[0]).ok
    assert plugin.add_pod(trial, info, victim, nodes[0]).ok
    assert plugin.filter(trial, info, nodes[0]).reasons == (vr.RWOP_CONFLICT,)
    unrelated = NodePod(pod(vol.claim_pod("x", "other")))
    assert plugin.remove_pod(state, info, unrelated, nodes[0]).ok
    assert plugin.filter(state, info, nodes[0]).reasons == (vr.RWOP_CONFLICT,)


@pytest.mark.parametrize(("event", "helps"), [
    (ClusterEvent("node", "add", "n9"), True),
    (ClusterEvent("node", "update", "n9", frozenset({"labels"})), False),
    (ClusterEvent("persistentvolumeclaims", "add", "", obj=vol.pvc("solo")), True),
    (ClusterEvent("persistentvolumeclaims", "update", "", obj=vol.pvc("solo")), False),
    (ClusterEvent("persistentvolumeclaims", "add", "", obj=vol.pvc("nope")), False),
    (ClusterEvent("pod", "delete", "n1", obj=vol.claim_pod("user", "solo")), True),
    (ClusterEvent("pod", "delete", "n1", obj=vol.claim_pod("user", "solo",
                                                           namespace="other")), False),
    (ClusterEvent("pod", "delete", "n1", obj=with_volumes("h", disk(GCE, pdName="a"))), True),
    (ClusterEvent("pod", "delete", "n1", obj=builders.pod("plain")), False),
    (ClusterEvent("pod", "delete", "n1"), True),
    (ClusterEvent("pod", "add", "n1", obj=builders.pod("plain")), False),
])
def test_restriction_hints(event: ClusterEvent, helps: bool) -> None:
    info = pod(with_volumes("p", {"name": "v", "persistentVolumeClaim": {"claimName": "solo"}},
                            disk(GCE, pdName="a")))
    assert vr.VolumeRestrictions(StorageHandle()).could_help(info, event) is helps
