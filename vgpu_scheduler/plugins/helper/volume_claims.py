"""The claims a pod mounts, and the checks every volume plugin makes on them first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.plugins.helper.volume_objects import Claim


@dataclass(frozen=True, slots=True)
class ClaimUse:
    """A volume of a pod backed by a claim: named in ``persistentVolumeClaim``, or the
    claim the ephemeral-volume controller creates for an ``ephemeral`` volume."""

    name: str
    ephemeral: bool = False
    #: The volume is mounted read-only (``persistentVolumeClaim.readOnly``).
    read_only: bool = False


def claim_uses(pod: Obj) -> tuple[ClaimUse, ...]:
    """The pod's claims in ``spec.volumes`` order (malformed entries are skipped: the
    scheduler refuses such a pod before any plugin sees it)."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    if not isinstance(volumes, list):
        return ()
    pod_name = meta.name(pod)
    out: list[ClaimUse] = []
    for volume in volumes:
        if not isinstance(volume, Mapping):
            continue
        pvc: Any = volume.get("persistentVolumeClaim")
        if isinstance(pvc, Mapping) and pvc.get("claimName"):
            out.append(ClaimUse(str(pvc["claimName"]), read_only=bool(pvc.get("readOnly"))))
        elif volume.get("ephemeral") is not None:
            # The ephemeral-volume controller names the claim <pod>-<volume>.
            out.append(ClaimUse(f"{pod_name}-{volume.get('name')}", ephemeral=True))
    return tuple(out)


def not_found(use: ClaimUse) -> str:
    """kube's words for a claim that does not exist (yet)."""
    if use.ephemeral:
        return ("waiting for ephemeral volume controller to create the "
                f"persistentvolumeclaim \"{use.name}\"")
    return f"persistentvolumeclaim \"{use.name}\" not found"


def not_owned(claim: Claim, pod: PodInfo) -> str | None:
    """Why an ephemeral volume's claim is not the pod's (a claim of that name the pod's
    controller did not create), or None when it is."""
    if claim.controller_uid is not None and claim.controller_uid == pod.uid:
        return None
    return (f"PVC {claim.namespace}/{claim.name} was not created for pod "
            f"{pod.namespace}/{pod.name} (pod is not owner)")


def malformed(claim: Claim) -> str:
    return f"persistentvolumeclaim \"{claim.name}\" is malformed: {claim.error}"


def names_pod_claim(pod: PodInfo, event: ClusterEvent) -> bool:
    """Whether a claim event is about one of the pod's claims (an event without its
    object may be: yes)."""
    if event.obj is None:
        return True
    obj = event.obj
    return meta.namespace(obj) == pod.namespace and meta.name(obj) in pod.claims
