"""VolumeZone: a bound PV's zone and region labels against the node's (kube's
volumezone_test single-zone, multi-zone and binding cases, in our words)."""

from __future__ import annotations

import pytest

from tests.scheduler.volume_helpers import StorageHandle, node, pod, pre_filtered
from tests.support import volumes as vol
from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube import volume_zone as zone
from vgpu_scheduler.plugins.kube.volume_zone import VolumeZone

BETA_ZONE, BETA_REGION = zone.BETA_ZONE, zone.BETA_REGION
ZONE, REGION = zone.ZONE, zone.REGION


def labelled(labels: dict[str, str]) -> list[Obj]:
    """A claim ``a`` bound to a PV with ``labels``."""
    return [vol.pvc("a", "wait", volume="pv", bound=True),
            vol.pv("pv", "wait", labels=labels, phase="Bound")]


@pytest.mark.parametrize(("pv_labels", "node_labels", "fits"), [
    ({BETA_ZONE: "us-west1-a"}, {}, True),  # a node without zone labels takes anything
    ({BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, True),
    ({BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-b"}, False),
    ({BETA_REGION: "us-west1"}, {BETA_REGION: "us-west1", BETA_ZONE: "us-west1-a"}, True),
    ({BETA_REGION: "us-west1"}, {BETA_REGION: "us-east1"}, False),
    ({ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
    ({ZONE: "us-west1-a"}, {ZONE: "us-west1-c"}, False),
    ({REGION: "us-west1"}, {REGION: "us-east1"}, False),
    # A PV with the deprecated label, a node with the GA one (and the reverse is a miss).
    ({BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
    ({ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, False),
    ({ZONE: "us-west1-a", REGION: "us-west1"}, {ZONE: "us-west1-a", REGION: "us-east1"},
     False),
    ({"unrelated": "x"}, {ZONE: "us-west1-a"}, True),
    # Volumes spanning several zones.
    ({ZONE: "us-west1-a__us-west1-b"}, {ZONE: "us-west1-b"}, True),
    ({BETA_ZONE: "us-west1-a__us-west1-b"}, {BETA_ZONE: "us-west1-c"}, False),
    ({ZONE: " us-west1-a__us-west1-b "}, {ZONE: "us-west1-a"}, True),
    # A list with an empty zone is no constraint at all.
    ({ZONE: "us-west1-a__"}, {ZONE: "us-west1-c"}, True),
])
def test_zone_filter(pv_labels: dict[str, str], node_labels: dict[str, str],
                     fits: bool) -> None:
    plugin = VolumeZone(StorageHandle(vol.storage_class("wait"), *labelled(pv_labels)))
    info = pod(vol.claim_pod("p", "a"))
    n = node("n1", node_labels)
    state, status = pre_filtered(plugin, info, n)
    if status.code is Code.SKIP:
        assert fits
        return
    got = plugin.filter(state, info, n)
    assert got.ok is fits
    if not fits:
        assert got.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert got.reasons == (zone.REASON,)


@pytest.mark.parametrize(("objects", "code", "message"), [
    pytest.param([], Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "a" not found', id="claim-missing"),
    pytest.param([vol.pvc("a", "wait", volume="pv", bound=True)],
                 Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolume "pv" not found',
                 id="volume-missing"),
    pytest.param([vol.pvc("a", "wait")], Code.SKIP, "", id="unbound-wait-for-first-consumer"),
    pytest.param([vol.pvc("a", "immediate")], Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 "PersistentVolume had no name", id="unbound-immediate"),
    pytest.param([vol.pvc("a", "")], Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 "PersistentVolumeClaim had no pv name and storageClass name",
                 id="unbound-without-class"),
    pytest.param([vol.pvc("a", "gone")], Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'storageclass.storage.k8s.io "gone" not found', id="class-missing"),
    pytest.param([vol.pvc("a", "nomode")], Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'VolumeBindingMode not set for StorageClass "nomode"', id="class-without-mode"),
    pytest.param(labelled({}), Code.SKIP, "", id="volume-without-topology"),
])
def test_zone_pre_filter(objects: list[Obj], code: Code, message: str) -> None:
    classes = (vol.storage_class("wait"), vol.storage_class("immediate", mode="Immediate"),
               vol.storage_class("nomode", mode=None))
    plugin = VolumeZone(StorageHandle(*classes, *objects))
    _, status = pre_filtered(plugin, pod(vol.claim_pod("p", "a")), node("n1"))
    assert status.code is code and message in status.message


def test_ephemeral_volumes_and_pods_without_claims_are_skipped() -> None:
    plugin = VolumeZone(StorageHandle())
    for obj in (vol.claim_pod("p", ephemeral=["scratch"]), vol.claim_pod("q")):
        _, status = pre_filtered(plugin, pod(obj), node("n1"))
        assert status.code is Code.SKIP


@pytest.mark.parametrize(("event", "helps"), [
    (ClusterEvent("node", "add", "n9"), True),
    (ClusterEvent("node", "update", "n9", frozenset({"labels"})), True),
    (ClusterEvent("node", "update", "n9", frozenset({"taints"})), False),
    (ClusterEvent("storageclasses", "add", "", obj=vol.storage_class("w")), True),
    (ClusterEvent("storageclasses", "add", "",
                  obj=vol.storage_class("i", mode="Immediate")), False),
    (ClusterEvent("persistentvolumes", "update", "", obj=vol.pv("pv")), True),
    (ClusterEvent("persistentvolumes", "delete", "", obj=vol.pv("pv")), False),
    (ClusterEvent("persistentvolumeclaims", "update", "", obj=vol.pvc("a")), True),
    (ClusterEvent("persistentvolumeclaims", "add", "", obj=vol.pvc("other")), False),
    (ClusterEvent("persistentvolumeclaims", "add", "", obj=vol.pvc("a", namespace="x")),
     False),
    (ClusterEvent("pod", "delete", "n1"), False),
])
def test_zone_hints(event: ClusterEvent, helps: bool) -> None:
    assert VolumeZone(StorageHandle()).could_help(pod(vol.claim_pod("p", "a")),
                                                  event) is helps
