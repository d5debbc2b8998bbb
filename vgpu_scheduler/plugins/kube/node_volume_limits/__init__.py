"""NodeVolumeLimits: no node gets more CSI volumes than its drivers can attach (kube's
``CSILimits``, registered as NodeVolumeLimits).

A driver's limit is its CSINode entry's ``allocatable.count`` (or, as before CSINode had
one, the node's ``attachable-volumes-csi-<driver>`` allocatable). The volumes counted are
the distinct ones of the node's pods plus the new pod's, found through claim → PV →
``spec.csi`` (driver, volumeHandle); a claim not bound yet counts as a volume of its
class's provisioner. A volume two pods share counts once.

In-tree volumes migrated to CSI (``kubernetes.io/aws-ebs`` PVs and inline disks on nodes
whose CSINode lists the plugin as migrated) are not translated, so not counted: the
clusters this scheduler serves use CSI drivers; kube would count them. kube's count of
VolumeAttachments on the node is not made either (the port does not watch them).
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Mapping

from vgpu.errors import QuantityError
from vgpu.quantity import parse_quantity
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import (
    SKIP,
    SUCCESS,
    Status,
    error,
    unresolvable,
    unschedulable,
)
from vgpu_scheduler.plugins.helper import volume_claims as cl
from vgpu_scheduler.plugins.helper.volume_objects import Claim, CSINode
from vgpu_scheduler.plugins.helper.volume_store import CLASSES, CSINODES, PVCS, PVS, Storage

REASON = "node(s) exceed max volume count"
ATTACHABLE = "attachable-volumes-"
CSI_PREFIX = "attachable-volumes-csi-"
#: The longest resource name the API accepts.
_NAME_LIMIT = 63
#: In-tree provisioners: their volumes are counted only through CSI migration.
_IN_TREE = "kubernetes.io/"


def limit_key(driver: str) -> str:
    """The resource name of a CSI driver's attach limit (kube's GetCSIAttachLimitKey:
    names too long keep 23 characters and a hash)."""
    if len(CSI_PREFIX) + len(driver) >= _NAME_LIMIT:
        digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
        return f"{CSI_PREFIX}{driver[:23]}{digest}"
    return CSI_PREFIX + driver


def node_limits(node: NodeInfo, csinode: CSINode | None) -> dict[str, int]:
    """Attach limits by limit key: the node's allocatable ones, overridden by the
    CSINode's per-driver counts."""
    limits: dict[str, int] = {}
    status = node.static.node.get("status") or {}
    allocatable = status.get("allocatable") if isinstance(status, Mapping) else None
    for name, raw in (allocatable or {}).items() if isinstance(allocatable, Mapping) else ():
        if str(name).startswith(ATTACHABLE):
            try:
                limits[str(name)] = int(parse_quantity(raw))
            except QuantityError:
                continue
    if csinode is not None:
        for driver, count in csinode.limits.items():
            limits[limit_key(driver)] = count
    return limits


class NodeVolumeLimits:
    name = "NodeVolumeLimits"
    diagnosis_memo = False

    def __init__(self, handle: Handle) -> None:
        self._store = Storage(handle, PVS, PVCS, CLASSES, CSINODES)
        # Stands in for the handle of a volume not provisioned yet, unlike any real one.
        self._unbound_prefix = uuid.uuid4().hex

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        return None, (SUCCESS if pod.claims else SKIP)

    def _driver_volume(self, claim: Claim) -> tuple[str, str] | None:
        """(driver, volume handle) of the claim's volume, or None when not a CSI one."""
        if claim.volume_name:
            volume = self._store.volume(claim.volume_name)
            if volume is not None:
                if volume.csi is None or not all(volume.csi):
                    return None
                return volume.csi
        # Not bound, or its PV is gone: it will be a volume of its class's provisioner.
        if not claim.storage_class:
            return None
        cls = self._store.storage_class(claim.storage_class)
        if cls is None or not cls.provisioner or cls.provisioner.startswith(_IN_TREE):
            return None
        return cls.provisioner, f"{self._unbound_prefix}-{claim.namespace}/{claim.name}"

    def _attachable(self, pod: PodInfo, out: dict[str, str], new: bool) -> Status:
        """Add the pod's CSI volumes to ``out`` (unique name → limit key). A new pod's
        missing claim is a rejection; an existing pod's is not counted."""
        for use in cl.claim_uses(pod.pod):
            claim = self._store.claim(pod.namespace, use.name)
            if claim is None or claim.error is not None:
                if not new:
                    continue
                if claim is not None:
                    return unresolvable(cl.malformed(claim))
                return unresolvable(f"looking up PVC {pod.namespace}/{use.name}: "
                                    f"persistentvolumeclaims \"{use.name}\" not found")
            if use.ephemeral:
                reason = cl.not_owned(claim, pod)
                if reason is not None:
                    return error(reason)
            found = self._driver_volume(claim)
            if found is not None:
                driver, handle = found
                out[f"{driver}/{handle}"] = limit_key(driver)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not pod.claims:
            return SUCCESS
        wanted: dict[str, str] = {}
        status = self._attachable(pod, wanted, new=True)
        if not status.ok or not wanted:
            return status
        limits = node_limits(node, self._store.csinode(node.name))
        if not limits:
            return SUCCESS
        attached: dict[str, str] = {}
        for other in node.pods.values():
            if other.info.claims and other.info.pod_id != pod.pod_id:
                status = self._attachable(other.info, attached, new=False)
                if not status.ok:
                    return status
        for unique in attached:
            wanted.pop(unique, None)
        in_use = Counter(attached.values())
        for key, count in Counter(wanted.values()).items():
            limit = limits.get(key)
            if limit is not None and in_use[key] + count > limit:
                return unschedulable(REASON)
        return SUCCESS

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "csinodes":
            return event.action in ("add", "update")
        if event.resource == "persistentvolumeclaims":
            return event.action == "add" and cl.names_pod_claim(pod, event)
        if event.resource != "pod" or event.action != "delete":
            return False
        gone = event.obj
        return gone is None or (bool((gone.get("spec") or {}).get("nodeName"))
                                and bool(cl.claim_uses(gone)))
