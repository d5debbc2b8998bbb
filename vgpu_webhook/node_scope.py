"""The node agent's writes stay on its own node (``/node-scope``).

RBAC cannot narrow a DaemonSet's rights to "its own" node: the agent's service account may
patch every Node and every pod's status. This rule, applied to every write by one of
``webhook.nodeAgents``, narrows them to what the agent does: on its own Node and on pods
bound to its node, set, change or remove ``vgpu.io/`` annotations and, on a pod's status,
``vgpu.io/`` conditions (the served record). A label, a taint, another annotation, a
container status, another node: denied. So one compromised GPU node cannot cordon,
taint or relabel another, nor rewrite the conditions of pods elsewhere (NVIDIA's plugin
has no write on nodes or pods at all; vgpu's agent needs these two).

Which node the agent is on comes from its token, never from the request body: the
``authentication.kubernetes.io/node-name`` extra of a pod-bound token (Kubernetes 1.30+,
:data:`NODE_NAME`), else the node of the pod its token is bound to (``pod-name`` and
``pod-uid``, 1.20+ with a projected token), which the caller looks up
(:mod:`vgpu_webhook.agent_nodes`). The ValidatingAdmissionPolicy of
``manifests/policy`` applies the same rule inside the API server on 1.30+
(:func:`vgpu_webhook.component_policies.node_scope_policy`).

A Node's ``oldObject`` cannot always be trusted: the Kubernetes 1.20.2 API server of the
e2e tests sends, for a PATCH of a Node, an ``oldObject`` that already carries the patch (the
same labels as ``object``; a pod's is right). So when a Node write shows no change at all,
:func:`stored_to_read` names the Node, the caller reads it as stored (the write is not
stored until it is admitted) and :func:`decide` compares with that instead. The stored Node
may be newer than the one the write was applied to (the kubelet's status, another writer's
label): a Node's status cannot change through ``nodes`` (only ``nodes/status``, which the
agent may not write), so it is left out, and any other difference is denied, which errs on
the safe side (the agent writes again).

Pure: the review's ``request``, the agents' usernames, the agent's node and the stored Node
in, an :class:`~vgpu_webhook.verdict.AdmissionVerdict` out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.protected import PREFIX
from vgpu_webhook.verdict import AdmissionVerdict, allow, deny

NODE_NAME = "authentication.kubernetes.io/node-name"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT = "system:serviceaccount:"
#: What the API server itself changes on a write, or the agent may not but cannot help.
BOOKKEEPING = ("managedFields", "resourceVersion", "generation")


@dataclass(frozen=True)
class Identity:
    """Who wrote, as its token says (never the request's object)."""

    username: str
    #: The service account's namespace (where its pod is).
    namespace: str
    #: The node the token is bound to (1.30+); "" when it does not say.
    node: str
    pod: str
    pod_uid: str


def _extra(info: Mapping[str, Any], key: str) -> str:
    extra = info.get("extra")
    values = extra.get(key) if isinstance(extra, Mapping) else None
    if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str):
        return values[0]
    return ""


def identity(request: Mapping[str, Any]) -> Identity:
    info = request.get("userInfo")
    info = info if isinstance(info, Mapping) else {}
    username = info.get("username")
    username = username if isinstance(username, str) else ""
    namespace = ""
    if username.startswith(SERVICE_ACCOUNT):
        namespace = username[len(SERVICE_ACCOUNT):].partition(":")[0]
    return Identity(username, namespace, _extra(info, NODE_NAME), _extra(info, POD_NAME),
                    _extra(info, POD_UID))


def _mapping(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _vgpu(key: Any) -> bool:
    return isinstance(key, str) and key.startswith(PREFIX)


def _annotations_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Annotation keys outside ``vgpu.io/`` that the write sets, changes or removes."""
    keys = {k for k in (*old, *new) if not _vgpu(k)}
    return sorted(str(k) for k in keys if (k in old) != (k in new) or old.get(k) != new.get(k))


def _metadata_changed(old: Any, new: Any) -> list[str]:
    before, after = dict(_mapping(old, "metadata")), dict(_mapping(new, "metadata"))
    notes = _annotations_changed(_mapping(before, "annotations"), _mapping(after, "annotations"))
    out = [f"annotation {k}" for k in notes]
    for key in sorted(set(before) | set(after)):
        if key in (*BOOKKEEPING, "annotations"):
            continue
        if before.get(key) != after.get(key):
            out.append(f"metadata.{key}")
    return out


def _conditions(status: Mapping[str, Any]) -> list[Any]:
    items = status.get("conditions")
    return [c for c in items if not (isinstance(c, Mapping) and _vgpu(c.get("type")))] \
        if isinstance(items, list) else []


def _rest_changed(old: Any, new: Any, *, pod: bool, ignored: tuple[str, ...] = ()) -> list[str]:
    """What outside ``metadata`` changed; a pod's ``vgpu.io/`` conditions may."""
    out = []
    keys = {*(old or {}), *(new or {})} - {"metadata", "apiVersion", "kind", *ignored}
    for key in sorted(keys):
        before, after = _mapping(old, key), _mapping(new, key)
        if pod and key == "status":
            if _conditions(before) != _conditions(after):
                out.append("status.conditions (but vgpu.io/ ones)")
            before = {k: v for k, v in before.items() if k != "conditions"}
            after = {k: v for k, v in after.items() if k != "conditions"}
        if before != after:
            out.append(key)
    return out


def _where(request: Mapping[str, Any]) -> tuple[str, str]:
    """(what the request writes, for messages; its resource's plural)."""
    resource = _mapping(request, "resource").get("resource")
    sub = request.get("subResource") or ""
    name = request.get("name") or ""
    namespace = request.get("namespace") or ""
    plural = resource if isinstance(resource, str) else ""
    shown = f"{plural}/{sub}" if sub else plural
    return f"{shown} {namespace + '/' if namespace else ''}{name}", plural


def stored_to_read(request: Mapping[str, Any], agents: Collection[str]) -> str:
    """The Node to read as stored before :func:`decide` (see the module's note): a node
    agent's write of a Node whose review shows no change at all (not even to a ``vgpu.io/``
    annotation, which every write of the agent makes); "" for any other write."""
    if identity(request).username not in agents or _where(request)[1] != "nodes" or \
            request.get("subResource"):
        return ""
    old, new = request.get("oldObject"), request.get("object")
    if _without_bookkeeping(old) != _without_bookkeeping(new):
        return ""
    return str(_mapping(old, "metadata").get("name") or request.get("name") or "")


def _without_bookkeeping(obj: Any) -> dict[str, Any]:
    out = dict(obj) if isinstance(obj, Mapping) else {}
    out["metadata"] = {k: v for k, v in _mapping(obj, "metadata").items()
                       if k not in BOOKKEEPING}
    return out


def decide(request: Mapping[str, Any], agents: Collection[str], node: str | None,
           stored: Mapping[str, Any] | None = None) -> AdmissionVerdict:
    """``node``: the node the writer's token is bound to (None: it could not be told);
    ``stored``: the Node as stored, read as :func:`stored_to_read` asks (None: not read)."""
    who = identity(request)
    if who.username not in agents:
        return allow("skipped", "not a node agent's write")
    what, plural = _where(request)
    if request.get("operation") != "UPDATE" or plural not in ("nodes", "pods") or \
            request.get("subResource") not in (None, "", "status"):
        return deny(f"the node agent {who.username!r} only updates Nodes and pods' status "
                    f"on its own node, not {request.get('operation')} {what}", code=403)
    if not node:
        return deny(
            f"cannot tell which node the node agent {who.username!r} runs on: its token is "
            f"bound to no node and to no pod of its namespace that is bound to one; run it "
            f"with a projected service-account token (manifests/base/core/nodeagent.yaml)",
            code=403)
    old, new = request.get("oldObject"), request.get("object")
    ignored: tuple[str, ...] = ()
    if stored is not None and plural == "nodes":
        old, ignored = stored, ("status",)
    if plural == "nodes":
        target = str(_mapping(old, "metadata").get("name") or "")
    else:
        target = str(_mapping(old, "spec").get("nodeName") or "")
    if target != node:
        return deny(f"the node agent of node {node!r} may not write {what}: it is "
                    f"{'another node' if plural == 'nodes' else 'on another node'}"
                    f"{' (' + target + ')' if target else ''}", code=403)
    changed = _metadata_changed(old, new) + _rest_changed(old, new, pod=plural == "pods",
                                                           ignored=ignored)
    if changed:
        return deny(f"the node agent of node {node!r} may change only {PREFIX} annotations "
                    f"(and {PREFIX} conditions of a pod's status) on {what}, not "
                    f"{', '.join(changed[:5])}", code=403)
    return allow("unchanged", "the node agent's own marks on its own node")
