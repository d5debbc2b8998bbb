"""VolumeBinding's decisions: which of a pod's claims are bound, and per node, whether
every claim can be satisfied there and how (kube's ``GetPodVolumeClaims`` and
``FindPodVolumes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Status, error, unresolvable
from vgpu_scheduler.plugins.helper import volume_claims as cl
from vgpu_scheduler.plugins.helper.volume_objects import (
    CLAIM_LOST,
    WAIT_FOR_FIRST_CONSUMER,
    Claim,
    Volume,
)
from vgpu_scheduler.plugins.helper.volume_store import Storage
from vgpu_scheduler.plugins.kube.volume_binding.matching import (
    affinity_matches,
    by_request,
    can_provision,
    find_matching_volume,
    topology_allows,
)

BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


@dataclass(frozen=True)
class PodClaims:
    """A pod's claims, sorted as VolumeBinding treats them."""

    #: Fully bound claims with their volume (None: the volume does not exist).
    bound: tuple[tuple[Claim, Volume | None], ...] = ()
    #: Unbound claims of a WaitForFirstConsumer class: the scheduler's to bind.
    delayed: tuple[Claim, ...] = ()
    #: The volumes of each delayed claim's class, read once per cycle.
    candidates: Mapping[str, tuple[Volume, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """How a node satisfies the delayed claims: static PVs to bind, claims to provision."""

    static: tuple[tuple[Claim, Volume], ...] = ()
    provisions: tuple[Claim, ...] = ()


def _claim(pod: PodInfo, use: cl.ClaimUse, store: Storage) -> Claim | Status:
    claim = store.claim(pod.namespace, use.name)
    if claim is None:
        return unresolvable(cl.not_found(use))
    if claim.error is not None:
        return unresolvable(cl.malformed(claim))
    if claim.phase == CLAIM_LOST:
        return unresolvable(f"persistentvolumeclaim \"{claim.name}\" bound to non-existent "
                            f"persistentvolume \"{claim.volume_name}\"")
    if claim.deleting:
        return unresolvable(f"persistentvolumeclaim \"{claim.name}\" is being deleted")
    if use.ephemeral:
        reason = cl.not_owned(claim, pod)
        if reason is not None:
            return unresolvable(reason)
    return claim


def _delayed(claim: Claim, store: Storage) -> bool | Status:
    """Whether an unbound claim is the scheduler's to bind (kube's IsDelayBindingMode; a
    claim naming a volume the binding of which is not complete counts as immediate)."""
    if not claim.storage_class:
        return False
    cls = store.storage_class(claim.storage_class)
    if cls is None:
        return False
    if cls.binding_mode is None:
        return error(f"VolumeBindingMode not set for StorageClass \"{cls.name}\"")
    return cls.binding_mode == WAIT_FOR_FIRST_CONSUMER and not claim.volume_name


def pod_claims(pod: PodInfo, store: Storage) -> PodClaims | Status:
    """PreFilter: every claim must exist, be usable and, unless it is the scheduler's to
    bind, be bound already."""
    found: list[Claim] = []
    for use in cl.claim_uses(pod.pod):
        claim = _claim(pod, use, store)
        if isinstance(claim, Status):
            return claim
        found.append(claim)
    bound: list[tuple[Claim, Volume | None]] = []
    delayed: list[Claim] = []
    immediate = False
    for claim in found:
        if claim.fully_bound:
            bound.append((claim, store.volume(claim.volume_name)))
            continue
        mode = _delayed(claim, store)
        if isinstance(mode, Status):
            return mode
        if mode:
            delayed.append(claim)
        else:
            immediate = True
    if immediate:
        # The PV controller binds these; the pod is retried when a claim changes.
        return unresolvable(UNBOUND_IMMEDIATE)
    classes = {c.storage_class for c in delayed}
    candidates: dict[str, list[Volume]] = {cls: [] for cls in classes}
    if classes:
        for volume in store.volumes():
            if volume.storage_class in candidates:
                candidates[volume.storage_class].append(volume)
    return PodClaims(tuple(bound), tuple(delayed),
                     {cls: tuple(vols) for cls, vols in candidates.items()})


def _bound_reasons(claims: PodClaims, labels: Mapping[str, str]) -> list[str]:
    """The bound claims' volumes against the node; the first misfit decides."""
    for _, volume in claims.bound:
        if volume is None:
            return [PV_NOT_EXIST]
        if volume.error is not None:
            return [f"persistentvolume \"{volume.name}\" is malformed: {volume.error}"]
        if not affinity_matches(volume, labels):
            return [NODE_CONFLICT]
    return []


def _provisions(claims: list[Claim], labels: Mapping[str, str],
                store: Storage) -> tuple[Claim, ...] | Status | None:
    """The claims to provision when the node allows them all; None when one cannot be
    provisioned for this node."""
    for claim in claims:
        if not claim.storage_class:
            return error(f"no class for claim \"{claim.key}\"")
        cls = store.storage_class(claim.storage_class)
        if cls is None:
            return error(f"failed to find storage class \"{claim.storage_class}\"")
        if not can_provision(cls) or not topology_allows(cls, labels):
            return None
    return tuple(claims)


def find_pod_volumes(claims: PodClaims, node: str, labels: Mapping[str, str],
                     store: Storage) -> Plan | Status:
    """Filter: the node's plan for the delayed claims, or why it has none."""
    reasons = _bound_reasons(claims, labels)
    if not claims.delayed:
        return unresolvable(*reasons) if reasons else Plan()
    to_match: list[Claim] = []
    to_provision: list[Claim] = []
    for claim in claims.delayed:
        selected = claim.selected_node
        if selected is None:
            to_match.append(claim)
        elif selected != node:
            # Provisioning was started for another node; only that node can host it.
            return unresolvable(*_ordered(reasons, BIND_CONFLICT))
        else:
            to_provision.append(claim)
    static: list[tuple[Claim, Volume]] = []
    chosen: list[str] = []
    for claim in by_request(to_match):
        volume = find_matching_volume(claim, claims.candidates.get(claim.storage_class, ()),
                                      labels, chosen)
        if volume is None:
            to_provision.append(claim)
        else:
            chosen.append(volume.name)
            static.append((claim, volume))
    provisions = _provisions(to_provision, labels, store) if to_provision else ()
    if isinstance(provisions, Status):
        return provisions
    if provisions is None:
        return unresolvable(*_ordered(reasons, BIND_CONFLICT))
    if reasons:
        return unresolvable(*reasons)
    return Plan(tuple(static), provisions)


def _ordered(reasons: list[str], extra: str) -> list[str]:
    """kube's order: node affinity conflict, then no volume to bind, then missing PVs."""
    head = [r for r in reasons if r != PV_NOT_EXIST]
    return [*head, extra, *(r for r in reasons if r == PV_NOT_EXIST)]
