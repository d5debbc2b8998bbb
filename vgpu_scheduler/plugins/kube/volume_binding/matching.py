"""Which PersistentVolume a claim can take on a node, and where a class may provision:
kube's ``FindMatchingVolume``, ``CheckNodeAffinity`` and ``MatchTopologySelectorTerms``,
as pure functions over parsed objects.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from vgpu.cluster.port import Obj
from vgpu_scheduler.plugins.helper.node_affinity import term_matches
from vgpu_scheduler.plugins.helper.volume_objects import (
    BOUND_BY_CONTROLLER,
    NO_PROVISIONER,
    VOLUME_AVAILABLE,
    Claim,
    StorageClass,
    Volume,
)


def affinity_matches(volume: Volume, labels: Mapping[str, str]) -> bool:
    """Whether a node with ``labels`` satisfies the volume's required node affinity.

    As kube's ``CheckNodeAffinity``, the terms see the node's labels only, not its name: a
    ``matchFields`` on ``metadata.name`` matches no node. A volume whose affinity cannot be
    read matches none either (kube: an error is a mismatch).
    """
    if volume.error is not None:
        return False
    if volume.affinity is None:
        return True
    return any(term_matches(term, labels, "") for term in volume.affinity)


def bound_to(volume: Volume, claim: Claim) -> bool:
    """The volume is bound, or pre-bound by its author, to this claim (by name; by UID too
    when the reference names one)."""
    ref = volume.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.uid


def _candidate(volume: Volume, claim: Claim) -> bool:
    """The checks of a volume against a claim that do not depend on the node."""
    if volume.error is not None or volume.deleting:
        return False
    if volume.claim_ref is not None and not bound_to(volume, claim):
        return False
    return volume.capacity >= claim.request and volume.volume_mode == claim.volume_mode


def find_matching_volume(claim: Claim, volumes: Iterable[Volume], labels: Mapping[str, str],
                         excluded: Iterable[str] = ()) -> Volume | None:
    """The volume a delayed-binding claim would get on a node with ``labels``.

    A volume already bound (or pre-bound) to the claim wins outright, or rules the node out
    when its affinity excludes the node. Otherwise the smallest available volume of the
    claim's class that is big enough, of the same volume mode, selected by the claim's
    selector, offers every access mode the claim asks for and can be reached from the node.
    ``excluded`` names volumes other claims of the same pod took already.
    """
    skip = set(excluded)
    best: Volume | None = None
    for volume in volumes:
        if volume.name in skip or not _candidate(volume, claim):
            continue
        reachable = affinity_matches(volume, labels)
        if bound_to(volume, claim):
            return volume if reachable else None
        if volume.phase != VOLUME_AVAILABLE:
            # Volumes on their way to Available are left alone: binding one now would
            # likely lose a race with the PV controller.
            continue
        if claim.selector is not None and not claim.selector.matches(volume.labels):
            continue
        if volume.storage_class != claim.storage_class or not reachable:
            continue
        if not claim.access_modes <= volume.access_modes:
            continue
        if best is None or volume.capacity < best.capacity:
            best = volume
    return best


def by_request(claims: Iterable[Claim]) -> list[Claim]:
    """Smallest request first, so that the small claims take the small volumes."""
    return sorted(claims, key=lambda c: c.request)


def can_provision(cls: StorageClass) -> bool:
    return bool(cls.provisioner) and cls.provisioner != NO_PROVISIONER


def topology_allows(cls: StorageClass, labels: Mapping[str, str]) -> bool:
    """Whether the class may provision a volume that a node with ``labels`` reaches: no
    ``allowedTopologies`` allows every node; else some term all of whose expressions hold
    (an empty term, or one with an empty value list, allows nothing)."""
    if not cls.allowed_topologies:
        return True
    for term in cls.allowed_topologies:
        if not term or any(not values for _, values in term):
            continue
        if all(labels.get(key) in values for key, values in term):
            return True
    return False


def bind_volume_to_claim(volume: Volume, claim: Claim) -> tuple[Obj, bool]:
    """The volume's object with ``spec.claimRef`` naming the claim, as the PV controller
    writes it, and whether that changed anything. ``bound-by-controller`` marks a binding
    its author did not make (a volume pre-bound to the claim keeps its author's)."""
    raw = copy.deepcopy(volume.raw)
    dirty = False
    ref = volume.claim_ref
    if ref is None or (ref.namespace, ref.name, ref.uid) != (claim.namespace, claim.name,
                                                              claim.uid):
        raw.setdefault("spec", {})["claimRef"] = {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": claim.namespace, "name": claim.name, "uid": claim.uid,
            "resourceVersion": claim.resource_version,
        }
        dirty = True
    meta = raw.setdefault("metadata", {})
    annotations = meta["annotations"] = dict(meta.get("annotations") or {})
    if not bound_to(volume, claim) and BOUND_BY_CONTROLLER not in annotations:
        annotations[BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return raw, dirty
