"""VolumeZone: a pod goes where its bound volumes are (kube's plugin of that name).

A bound PV's zone and region labels (``topology.kubernetes.io/zone``/``region`` and the
deprecated ``failure-domain.beta.kubernetes.io`` ones; a value may list zones joined by
``__``) must match the node's; a node with none of these labels accepts any volume (a
single-zone cluster). Unbound ``WaitForFirstConsumer`` claims are VolumeBinding's.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable
from vgpu_scheduler.plugins.helper import volume_claims as cl
from vgpu_scheduler.plugins.helper.volume_objects import WAIT_FOR_FIRST_CONSUMER, Volume
from vgpu_scheduler.plugins.helper.volume_store import CLASSES, PVCS, PVS, Storage

REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
#: Separates the zones of a volume that spans several.
MULTI_ZONE = "__"
_KEY = "VolumeZone"

Topology = tuple[str, frozenset[str]]


def volume_topology(volume: Volume) -> list[Topology]:
    """The volume's topology labels as (key, allowed values); a value with an empty zone
    in its list is ignored, as kube does."""
    out: list[Topology] = []
    for key in TOPOLOGY_LABELS:
        value = volume.labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.split(MULTI_ZONE)]
        if all(zones):
            out.append((key, frozenset(zones)))
    return out


def zone_fits(topology: list[Topology], labels: Mapping[str, str]) -> bool:
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return True
    for key, values in topology:
        # A PV with the beta label matches a node that only has the GA one.
        value = labels.get(key, labels.get(_GA.get(key, key)))
        if value is None or value not in values:
            return False
    return True


class VolumeZone:
    name = "VolumeZone"
    diagnosis_memo = False

    def __init__(self, handle: Handle) -> None:
        self._store = Storage(handle, PVS, PVCS, CLASSES)

    def _topology(self, pod: PodInfo) -> list[Topology] | Status:
        out: list[Topology] = []
        for use in cl.claim_uses(pod.pod):
            if use.ephemeral:
                continue  # kube looks at persistentVolumeClaim volumes only
            claim = self._store.claim(pod.namespace, use.name)
            if claim is None:
                return unresolvable(cl.not_found(use))
            if claim.error is not None:
                return unresolvable(cl.malformed(claim))
            if not claim.volume_name:
                status = self._unbound(claim.storage_class)
                if status is not None:
                    return status
                continue
            volume = self._store.volume(claim.volume_name)
            if volume is None:
                return unresolvable(f"persistentvolume \"{claim.volume_name}\" not found")
            out.extend(volume_topology(volume))
        return out

    def _unbound(self, class_name: str) -> Status | None:
        """None for a claim the scheduler binds later; else why the pod cannot go on."""
        if not class_name:
            return unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
        cls = self._store.storage_class(class_name)
        if cls is None:
            return unresolvable(f"storageclass.storage.k8s.io \"{class_name}\" not found")
        if cls.binding_mode is None:
            return unresolvable(f"VolumeBindingMode not set for StorageClass \"{class_name}\"")
        if cls.binding_mode == WAIT_FOR_FIRST_CONSUMER:
            return None
        return unresolvable("PersistentVolume had no name")

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        if not pod.claims:
            return None, SKIP
        topology = self._topology(pod)
        if isinstance(topology, Status):
            return None, topology
        if not topology:
            return None, SKIP
        state.write(_KEY, topology)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        topology: list[Topology] | None = state.read(_KEY)
        if topology is None or zone_fits(topology, node.static.labels):
            return SUCCESS
        return unresolvable(REASON)

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "node":
            return event.action == "add" or "labels" in event.changes
        if event.action == "delete":
            return False
        if event.resource == "storageclasses":
            return event.action == "add" and (event.obj is None or event.obj.get(
                "volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER)
        if event.resource == "persistentvolumes":
            return True
        return event.resource == "persistentvolumeclaims" and cl.names_pod_claim(pod, event)
