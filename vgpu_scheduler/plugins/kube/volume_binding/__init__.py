"""VolumeBinding: a pod's PersistentVolumeClaims decide where it can run, and the
scheduler binds the ones that wait for their first consumer (kube's plugin of that name).

* PreFilter: every claim must exist and be usable; an unbound claim of an ``Immediate``
  class makes the pod unschedulable until the PV controller binds it.
* Filter: a bound claim's PV must accept the node (``spec.nodeAffinity``); an unbound
  ``WaitForFirstConsumer`` claim needs, on this node, an available PV that matches it
  (smallest fit) or a class that can provision there (``allowedTopologies``).
* Reserve: the chosen PVs and claims are assumed, so the next pod does not take them.
* PreBind: the writes, then the wait until every claim is bound (:mod:`.prebind`).
* Unreserve forgets the assumptions. As in kube it does not undo writes PreBind made: a
  provisioner may already be creating the volume, and taking its cue away would race it;
  a retried pod goes back to the node its claim names, and a provisioner that cannot
  provision there removes the annotation, which lets the pod go elsewhere.

Storage-capacity checks (CSIStorageCapacity) and the alpha capacity score are not done:
kube skips both unless a CSIDriver opts in or a feature gate is on. Nor is the in-tree to
CSI translation of PVs (kube reads CSINodes for it), so CSINode changes wake no pod here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, error
from vgpu_scheduler.plugins.helper import volume_claims as cl
from vgpu_scheduler.plugins.helper.volume_objects import SELECTED_NODE, parse_claim, parse_volume
from vgpu_scheduler.plugins.helper.volume_store import CLASSES, PVCS, PVS, Storage
from vgpu_scheduler.plugins.kube.volume_binding import prebind
from vgpu_scheduler.plugins.kube.volume_binding.find import (
    Plan,
    PodClaims,
    find_pod_volumes,
    pod_claims,
)
from vgpu_scheduler.plugins.kube.volume_binding.matching import bind_volume_to_claim

NAME = "VolumeBinding"
_KEY = "VolumeBinding"


@dataclass
class _State:
    claims: PodClaims
    #: Filter's plan per feasible node (the state is this cycle's alone).
    plans: dict[str, Plan] = field(default_factory=dict)
    assumed: prebind.Assumed | None = None
    all_bound: bool = False


class VolumeBinding:
    name = NAME
    #: Answers depend on PVs and claims, not only on the node and the pod's shape.
    diagnosis_memo = False

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._store = Storage(handle, PVS, PVCS, CLASSES)
        sc = handle.config.scheduler
        self._timeout = sc.volume_bind_timeout_seconds
        self._poll = sc.volume_bind_poll_seconds

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        if not pod.claims:
            return None, SKIP
        claims = pod_claims(pod, self._store)
        if isinstance(claims, Status):
            return None, claims
        state.write(_KEY, _State(claims))
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        st: _State | None = state.read(_KEY)
        if st is None:
            return SUCCESS
        plan = find_pod_volumes(st.claims, node.name, node.static.labels, self._store)
        if isinstance(plan, Status):
            return plan
        st.plans[node.name] = plan
        return SUCCESS

    # -- reserve ---------------------------------------------------------------------------

    def _all_bound(self, pod: PodInfo) -> bool:
        for name in pod.claims:
            claim = self._store.claim(pod.namespace, name)
            if claim is None or not claim.fully_bound:
                return False
        return True

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st: _State | None = state.read(_KEY)
        if st is None:
            return SUCCESS
        plan = st.plans.get(node)
        st.all_bound = plan is None or self._all_bound(pod)
        if st.all_bound or plan is None:
            return SUCCESS
        static = []
        for claim, volume in plan.static:
            raw, dirty = bind_volume_to_claim(volume, claim)
            bound = parse_volume(raw)
            if dirty:
                self._store.assume_volume(bound)
            static.append((claim, bound))
        provisions = []
        for claim in plan.provisions:
            raw = dict(claim.raw, metadata=dict(claim.raw.get("metadata") or {}))
            raw["metadata"]["annotations"] = {**claim.annotations, SELECTED_NODE: node}
            marked = parse_claim(raw)
            self._store.assume_claim(marked)
            provisions.append(marked)
        st.assumed = prebind.Assumed(tuple(static), tuple(provisions))
        return SUCCESS

    def _revert(self, assumed: prebind.Assumed, start: int = 0) -> None:
        """Forget the assumptions from the ``start``-th write on (earlier ones reached
        the API server and the watch brings them)."""
        writes = [("pv", v.name) for _, v in assumed.static]
        writes += [("pvc", c.key) for c in assumed.provisions]
        for kind, key in writes[start:]:
            if kind == "pv":
                self._store.restore_volume(key)
            else:
                self._store.restore_claim(key)

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        st: _State | None = state.read(_KEY)
        if st is not None and st.assumed is not None:
            self._revert(st.assumed)

    # -- prebind ---------------------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st: _State | None = state.read(_KEY)
        if st is None or st.all_bound:
            return SUCCESS
        assumed = st.assumed
        if assumed is None:
            return error(f"no pod volumes found for node \"{node}\"")
        cluster = self._handle.cluster
        if cluster is None:
            return error("no cluster to bind volumes through")
        done, failure = prebind.write(cluster, assumed, node)
        if failure is not None:
            self._revert(assumed, done)
            return error(failure)
        info = self._handle.node_info(node)
        if info is None:
            return error(f"binding volumes: failed to get node \"{node}\"")
        labels = info.static.labels
        what = f"PersistentVolumeClaim(s) {', '.join(assumed.claim_keys)}"
        failure = prebind.wait(
            lambda: prebind.check_bindings(cluster, pod, node, labels, assumed),
            timeout=self._timeout, poll=self._poll, what=what)
        if failure is not None:
            return error(f"binding volumes: {failure}")
        return SUCCESS

    # -- queueing hints --------------------------------------------------------------------

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "node":
            return event.action == "add" or "labels" in event.changes
        if event.action == "delete":
            return False
        if event.resource in ("persistentvolumes", "storageclasses"):
            return True
        if event.resource == "persistentvolumeclaims":
            return cl.names_pod_claim(pod, event)
        return False

