"""VolumeRestrictions: volumes that only one pod may use (kube's plugin of that name).

* A ``ReadWriteOncePod`` claim already used by another pod anywhere in the cluster makes
  the pod unschedulable (preemption may free it, so "unschedulable", not "unresolvable").
* The in-tree disks kube still checks: the same GCE PD (unless every mount is read-only),
  AWS EBS volume, iSCSI IQN (unless all read-only) or Ceph RBD image (a shared monitor,
  same pool and image, unless all read-only) cannot be mounted by two pods of one node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable, unschedulable
from vgpu_scheduler.plugins.helper import volume_claims as cl
from vgpu_scheduler.plugins.helper.volume_objects import READ_WRITE_ONCE_POD
from vgpu_scheduler.plugins.helper.volume_store import PVCS, Storage

DISK_CONFLICT = "node(s) had no available disk"
RWOP_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and "
                 "ReadWriteOncePod access mode")
_KEY = "VolumeRestrictions"
_DISKS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")
#: The API server's default ``rbd.pool``.
_RBD_POOL = "rbd"


def _volumes(pod: Obj) -> list[Mapping[str, Any]]:
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    return [v for v in volumes or () if isinstance(v, Mapping)]


def _source(volume: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    source = volume.get(kind)
    return source if isinstance(source, Mapping) else None


def _same_disk(kind: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    both_read_only = bool(a.get("readOnly")) and bool(b.get("readOnly"))
    if kind == "gcePersistentDisk":
        return a.get("pdName") == b.get("pdName") and not both_read_only
    if kind == "awsElasticBlockStore":
        return a.get("volumeID") == b.get("volumeID")
    if kind == "iscsi":
        return a.get("iqn") == b.get("iqn") and not both_read_only
    monitors = set(a.get("monitors") or ()) & set(b.get("monitors") or ())
    return (bool(monitors) and (a.get("pool") or _RBD_POOL) == (b.get("pool") or _RBD_POOL)
            and a.get("image") == b.get("image") and not both_read_only)


def disk_conflict(volume: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``volume`` (an in-tree disk) is one of ``others`` that cannot be shared."""
    for kind in _DISKS:
        mine = _source(volume, kind)
        if mine is None:
            continue
        for other in others:
            theirs = _source(other, kind)
            if theirs is not None and _same_disk(kind, mine, theirs):
                return True
    return False


@dataclass(frozen=True)
class _State:
    #: The pod's ReadWriteOncePod claims, and how many of them other pods use.
    rwop: frozenset[str]
    conflicts: int
    #: The pod's in-tree disk volumes.
    disks: tuple[Mapping[str, Any], ...]


def _uses(info: PodInfo, namespace: str, names: frozenset[str]) -> int:
    """How many of ``names`` (claims in ``namespace``) the pod mounts."""
    if info.namespace != namespace:
        return 0
    return sum(1 for name in set(info.claims) if name in names)


class VolumeRestrictions:
    name = "VolumeRestrictions"
    diagnosis_memo = False

    def __init__(self, handle: Handle) -> None:
        self._store = Storage(handle, PVCS)

    def _rwop(self, pod: PodInfo) -> frozenset[str] | Status:
        found: set[str] = set()
        for use in cl.claim_uses(pod.pod):
            if use.ephemeral:
                continue  # kube looks at persistentVolumeClaim volumes only
            claim = self._store.claim(pod.namespace, use.name)
            if claim is None:
                return unresolvable(cl.not_found(use))
            if READ_WRITE_ONCE_POD in claim.access_modes:
                found.add(claim.name)
        return frozenset(found)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        volumes = _volumes(pod.pod)
        if not volumes:
            return None, SKIP
        disks = tuple(v for v in volumes if any(_source(v, k) is not None for k in _DISKS))
        rwop = self._rwop(pod) if pod.claims else frozenset()
        if isinstance(rwop, Status):
            return None, rwop
        conflicts = 0
        if rwop:
            used: set[str] = set()
            for node in snapshot:
                for key, other in node.pods.items():
                    if key != pod.pod_id and other.info.namespace == pod.namespace:
                        used.update(n for n in other.info.claims if n in rwop)
            conflicts = len(used)
        if not disks and not conflicts:
            return None, SKIP
        state.write(_KEY, _State(rwop, conflicts, disks))
        return None, SUCCESS

    def _adjust(self, state: CycleState, pod: PodInfo, other: NodePod, sign: int) -> Status:
        st: _State | None = state.read(_KEY)
        if st is not None and st.rwop and other.info.pod_id != pod.pod_id:
            delta = sign * _uses(other.info, pod.namespace, st.rwop)
            if delta:
                # A new value: clones of the state share the old one.
                state.write(_KEY, _State(st.rwop, st.conflicts + delta, st.disks))
        return SUCCESS

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        return self._adjust(state, pod, added, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        return self._adjust(state, pod, removed, -1)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        st: _State | None = state.read(_KEY)
        if st is None:
            return SUCCESS
        if st.disks:
            for other in node.pods.values():
                theirs = _volumes(other.info.pod)
                if theirs and any(disk_conflict(v, theirs) for v in st.disks):
                    return unschedulable(DISK_CONFLICT)
        if st.conflicts > 0:
            return unschedulable(RWOP_CONFLICT)
        return SUCCESS

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "node":
            return event.action == "add"
        if event.resource == "persistentvolumeclaims":
            return event.action == "add" and cl.names_pod_claim(pod, event)
        if event.resource != "pod" or event.action != "delete":
            return False
        gone = event.obj
        if gone is None:
            return True
        mine = _volumes(pod.pod)
        if any(disk_conflict(v, _volumes(gone)) for v in mine):
            return True
        return meta.namespace(gone) == pod.namespace and any(
            use.name in pod.claims for use in cl.claim_uses(gone))
