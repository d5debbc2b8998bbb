"""VolumeBinding's PreBind: write the decisions, then wait until every claim is bound.

The writes are kube's: a static volume gets ``spec.claimRef`` (the PV controller then
completes the binding), a claim to provision gets ``volume.kubernetes.io/selected-node``
(the external provisioner or the PV controller then creates a volume reachable from that
node and binds it). Then the pod is bound only once every one of those claims is fully
bound, so the kubelet never starts it against a claim that is not.

The wait reads the claims (and their volumes, and the pod) with GETs through the cluster
port, every ``volumeBindPollSeconds``. kube-scheduler reads its informer caches instead,
which always run in their own goroutines; here the informers of a stepping scheduler (the
simulator, tests, ``run_until_idle``) are pumped by the very thread PreBind blocks, so a
lister-based wait could never see the binding there. A GET sees the API server's state in
both modes, at the cost of a few requests per second per pod waiting, which
``bindWorkers`` bounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vgpu import logs
from vgpu.cluster.port import ClusterPort
from vgpu.errors import ClusterError, NotFoundError
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.plugins.helper.volume_objects import (
    SELECTED_NODE,
    Claim,
    Volume,
    parse_claim,
    parse_volume,
)
from vgpu_scheduler.plugins.kube.volume_binding.matching import affinity_matches

_log = logs.get("vgpu.scheduler.volumes")


@dataclass(frozen=True)
class Assumed:
    """What Reserve decided for the chosen node: the volumes as they are to be written
    (claimRef set) with their claims, and the claims to provision (annotation set)."""

    static: tuple[tuple[Claim, Volume], ...] = ()
    provisions: tuple[Claim, ...] = ()

    @property
    def claim_keys(self) -> list[str]:
        return [c.key for c, _ in self.static] + [c.key for c in self.provisions]


def write(cluster: ClusterPort, plan: Assumed, node: str) -> tuple[int, str | None]:
    """Send the plan's writes in order: (how many succeeded, the first failure or None).

    Each write is conditional on the version the decision was made on, so a PV or claim
    that changed meanwhile fails the pod's binding instead of being overwritten.
    """
    done = 0
    try:
        for _, volume in plan.static:
            cluster.replace("persistentvolumes", volume.raw)
            done += 1
        for claim in plan.provisions:
            cluster.patch_annotations("persistentvolumeclaims", claim.name,
                                      {SELECTED_NODE: node}, claim.namespace,
                                      resource_version=claim.resource_version)
            done += 1
    except ClusterError as exc:
        return done, str(exc)
    return done, None


Check = Callable[[], "tuple[bool, str | None]"]


def check_bindings(cluster: ClusterPort, pod: PodInfo, node: str,
                   labels: Mapping[str, str], plan: Assumed) -> tuple[bool, str | None]:
    """(all bound, why the binding must be retried): kube's ``checkBindings`` on the API
    server's current objects."""
    try:
        cluster.get("pods", pod.name, pod.namespace)
    except NotFoundError as exc:
        return False, f"pod does not exist any more: {exc}"
    for claim, volume in plan.static:
        try:
            pv = parse_volume(cluster.get("persistentvolumes", volume.name))
            pvc = parse_claim(cluster.get("persistentvolumeclaims", claim.name,
                                          claim.namespace))
        except NotFoundError as exc:
            return False, f"failed to check binding: {exc}"
        if not affinity_matches(pv, labels):
            return False, f"pv \"{pv.name}\" node affinity doesn't match node \"{node}\""
        if pv.claim_ref is None or not pv.claim_ref.uid:
            # The PV controller dropped the reference (the claim went elsewhere).
            return False, f"ClaimRef got reset for pv \"{pv.name}\""
        if not pvc.fully_bound:
            return False, None
    for claim in plan.provisions:
        try:
            pvc = parse_claim(cluster.get("persistentvolumeclaims", claim.name,
                                          claim.namespace))
        except NotFoundError as exc:
            return False, f"failed to check provisioning pvc: {exc}"
        if not pvc.annotations:
            return False, f"selectedNode annotation reset for PVC \"{pvc.name}\""
        if pvc.selected_node != node:
            # A provisioner that cannot provision there removes the annotation: the
            # scheduler's cue to choose again.
            return False, f"provisioning failed for PVC \"{pvc.name}\""
        if pvc.volume_name:
            try:
                pv = parse_volume(cluster.get("persistentvolumes", pvc.volume_name))
            except NotFoundError:
                return False, None  # not visible yet; a deleted one unbinds the claim
            if not affinity_matches(pv, labels):
                return False, (f"pv \"{pv.name}\" node affinity doesn't match node "
                               f"\"{node}\"")
        if not pvc.fully_bound:
            return False, None
    return True, None


def wait(check: Check, *, timeout: float, poll: float, what: str,
         clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Call ``check`` every ``poll`` seconds until it says bound (None), fails (its
    reason) or ``timeout`` passes (a timeout reason). A transient API error is logged and
    the check is tried again."""
    deadline = clock() + timeout
    while True:
        try:
            done, reason = check()
        except ClusterError as exc:
            _log.warning("checking volume bindings failed; retrying", what=what,
                         error=str(exc))
            done, reason = False, None
        if reason is not None:
            return reason
        if done:
            return None
        left = deadline - clock()
        if left <= 0:
            return f"timed out after {timeout:g}s waiting for {what} to be bound"
        sleep(min(poll, left))
