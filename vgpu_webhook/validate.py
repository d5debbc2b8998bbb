"""The validating admission decision (``/validate``): vgpu's annotations belong to vgpu,
and a GPU pod takes no ephemeral container.

Registered for Pod CREATE and UPDATE (``pods`` and ``pods/ephemeralcontainers``, never
``pods/status``: the kubelet's status writes stay off it) by
``manifests/webhook/validatingwebhookconfiguration.yaml``; on Kubernetes 1.30 and later the
ValidatingAdmissionPolicy in ``manifests/policy`` applies the same annotation rule inside
the API server, ``pods/status`` included (a status write can change a pod's annotations;
there the check costs next to nothing). A ``status`` request sent here is checked as an
update.

- A request from one of ``webhook.annotationWriters`` (the scheduler's and the node
  agent's service accounts, by ``userInfo.username``) is allowed at once: those are the
  components' own writes, the most frequent updates this path sees.
- CREATE: a pod carrying a protected annotation (:mod:`vgpu.protected`) is denied, except
  the webhook's own records on a GPU pod (its mutating patch adds them).
- UPDATE: a write that sets, changes or removes a protected annotation is denied.
- ``pods/ephemeralcontainers``: adding an ephemeral container to a GPU pod is denied (it
  would run on the pod's node outside the slice the scheduler accounted).

A refusal is a denial with a message saying what to do instead, never a silent strip.
Pure: the ``request`` of an AdmissionReview and the configuration in, an
:class:`~vgpu_webhook.verdict.AdmissionVerdict` out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu import protected
from vgpu.config import Config
from vgpu.requests import names_gpu_resource
from vgpu_webhook.verdict import AdmissionVerdict, allow, deny

EPHEMERAL = "ephemeralcontainers"


def username(request: Mapping[str, Any]) -> str:
    info = request.get("userInfo")
    name = info.get("username") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else ""


def _is_pod(request: Mapping[str, Any]) -> bool:
    kind = request.get("kind")
    return (isinstance(kind, Mapping) and kind.get("kind") == "Pod"
            and kind.get("group", "") == "")


def _listed(keys: tuple[str, ...]) -> str:
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return f"annotation{'s' if len(keys) > 1 else ''} {shown}"


def _created(obj: Any, who: str, config: Config) -> AdmissionVerdict:
    keys = protected.present(protected.annotations_in(obj))
    if keys and names_gpu_resource(obj, config):
        keys = tuple(k for k in keys if k not in protected.WEBHOOK_RECORDS)
    if not keys:
        return allow("unchanged", "no vgpu annotation")
    users = ", ".join(sorted(protected.USER_KEYS))
    return deny(
        f"{_listed(keys)} {'belong' if len(keys) > 1 else 'belongs'} to vgpu: only its "
        f"scheduler and node agent write them (webhook.annotationWriters), not {who!r}; "
        f"create the pod without them (a copy of a placed pod, or a template made from one, "
        f"carries them). Of vgpu.io/ annotations a pod may carry {users}", code=403)


def _updated(old: Any, new: Any, who: str) -> AdmissionVerdict:
    keys = protected.changed(protected.annotations_in(old), protected.annotations_in(new))
    if not keys:
        return allow("unchanged", "no vgpu annotation changed")
    return deny(
        f"{_listed(keys)} {'belong' if len(keys) > 1 else 'belongs'} to vgpu: only its "
        f"scheduler and node agent set, change or remove them (webhook.annotationWriters), "
        f"not {who!r}; leave them as they are. A pod's GPU slice is fixed when it is bound: "
        f"to change it, delete the pod and create it again", code=403)


def _ephemeral(old: Any, new: Any, config: Config) -> AdmissionVerdict:
    def names(obj: Any) -> set[str]:
        spec = obj.get("spec") if isinstance(obj, Mapping) else None
        items = spec.get("ephemeralContainers") if isinstance(spec, Mapping) else None
        return {str(c.get("name")) for c in items or () if isinstance(c, Mapping)}

    added = sorted(names(new) - names(old))
    if not added or not names_gpu_resource(new, config):
        return allow("unchanged", "no ephemeral container added to a GPU pod")
    prefix = config.resource_names.gpu.split("/")[0]
    return deny(
        f"ephemeral container {added[0]!r} cannot join a pod that asks for {prefix}/* "
        f"resources: it would run on the pod's node outside the GPU slice the scheduler "
        f"accounted (a privileged one, or one setting NVIDIA_VISIBLE_DEVICES, sees every "
        f"GPU); use kubectl exec into the pod's containers, or debug in a pod of its own",
        code=403)


def validate(request: Mapping[str, Any], config: Config) -> AdmissionVerdict:
    """Decide on one admission request (the ``request`` member of an AdmissionReview)."""
    who = username(request)
    if who in config.webhook.annotation_writers:
        return allow("skipped", "a vgpu component's own write")
    operation = request.get("operation")
    if not _is_pod(request) or operation not in ("CREATE", "UPDATE"):
        return allow("skipped", "not a pod creation or update")
    sub = request.get("subResource") or ""
    new, old = request.get("object"), request.get("oldObject")
    if sub == EPHEMERAL:
        return _ephemeral(old, new, config)
    if sub not in ("", "status"):  # a status write can change annotations too
        return allow("skipped", f"subresource {sub}")
    if operation == "CREATE":
        return _created(new, who, config)
    return _updated(old, new, who)
