"""``isolation.mps.namespaceUsers``: one uid per namespace for the GPU containers of its pods
(docs/isolation.md#mps-users).

An MPS GPU serves one Linux uid at a time, and the scheduler puts together only pods of one
uid (:mod:`vgpu.mps_users`), so pods that state no ``runAsUser`` each take an MPS GPU of
their own. For a namespace the operator names, the webhook sets ``runAsUser`` on every GPU
container whose uid the pod does not state (on the container, so that the pod's other
containers keep theirs), and refuses a pod whose GPU container states another: its
namespace's pods then share MPS GPUs. The uid is the pod owner's to write, so the rule is a
refusal, not a silent change of what the owner wrote.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu import mps_users
from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu.requests import ParsedPod
from vgpu_webhook.patch import Op, add


def user_ops(parsed: ParsedPod, config: Config, namespace: str) -> list[Op]:
    """The operations that run the pod's GPU containers as ``namespace``'s uid; none when
    the namespace has none or the pod already runs them so. Raises :class:`RequestError`
    when a GPU container states another uid."""
    uid = config.isolation.mps.users.get(namespace)
    if uid is None:
        return []
    pod_uid = mps_users.run_as_user(parsed.spec.get("securityContext"))
    ops: list[Op] = []
    for container in parsed.containers:
        if container.request is None or not container.request.count:
            continue
        context = container.container.get("securityContext")
        own = mps_users.run_as_user(context)
        stated = own if own is not None else pod_uid
        if stated is not None and stated != uid:
            where = "its" if own is not None else "the pod's"
            raise RequestError(
                f"container {container.name}: runAsUser {stated} ({where} securityContext) "
                f"but namespace {namespace} runs its GPU containers as uid {uid} "
                f"(isolation.mps.namespaceUsers), so that its pods share MPS GPUs; use "
                f"{uid} or leave runAsUser unset")
        if stated is not None:
            continue
        base = f"/spec/{container.key}/{container.position}/securityContext"
        if isinstance(context, Mapping):
            ops.append(add(f"{base}/runAsUser", uid))
        else:
            ops.append(add(base, {"runAsUser": uid}))
    return ops
