"""The webhook's registrations as CEL, generated from the rules they stand for.

``manifests/webhook/mutatingwebhookconfiguration.yaml`` carries :func:`match_expression`
for the default resource names, ``manifests/webhook/validatingwebhookconfiguration.yaml``
:func:`validate_conditions`, and ``manifests/policy/validatingadmissionpolicy.yaml`` the
documents of :func:`admission_policy`, all for the default configuration; a cluster that
renames the resources or runs vgpu under other service accounts regenerates them (the
registration tests keep files and functions in step, and evaluate the CEL against the
Python rules it stands for: :func:`vgpu.requests.names_gpu_resource` and
:mod:`vgpu.protected`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vgpu import protected
from vgpu.config import Config, ResourceNames

POLICY = "vgpu-annotations"
#: Namespaces no registration reaches: Kubernetes' own and vgpu's (its components must be
#: able to start while the webhook is down).
SYSTEM_NAMESPACES = ("kube-system", "vgpu-node", "vgpu-system")
EPHEMERAL = "ephemeralcontainers"


def _list(items: Iterable[str]) -> str:
    return "[" + ", ".join(f"'{item}'" for item in sorted(items)) + "]"


def match_expression(names: ResourceNames, obj: str = "object") -> str:
    """CEL that is true for a pod whose containers or init containers name one of
    ``names`` in limits or requests: the same test as ``vgpu.requests.names_gpu_resource``.

    The exact names, not ``nvidia.com/*``: pods asking for resources of NVIDIA's own device
    plugin (``nvidia.com/mig-1g.5gb``, ...) are not vgpu's and must not be routed here.
    """
    listed = "[" + ", ".join(f"'{name}'" for name in names.all()) + "]"
    one = (f"has(c.resources) && ("
           f"(has(c.resources.limits) && c.resources.limits.exists(r, r in {listed})) || "
           f"(has(c.resources.requests) && c.resources.requests.exists(r, r in {listed})))")
    return (f"(has({obj}.spec.containers) && {obj}.spec.containers.exists(c, {one})) || "
            f"(has({obj}.spec.initContainers) && {obj}.spec.initContainers.exists(c, {one}))")


def protected_key(key: str) -> str:
    """CEL: annotation key ``key`` is vgpu's own (:func:`vgpu.protected.protected`)."""
    text = f"({key}.startsWith('{protected.PREFIX}') && !({key} in {_list(protected.USER_KEYS)}))"
    if protected.HAMI_WRITTEN:
        text = f"({text} || {key} in {_list(protected.HAMI_WRITTEN)})"
    return text


def writer_condition(writers: Iterable[str]) -> str:
    """CEL: the request is a vgpu component's own (``webhook.annotationWriters``)."""
    return f"request.userInfo.username in {_list(writers)}"


def created_with(gpu: str) -> str:
    """CEL, on a CREATE: the new pod carries a protected annotation that is not the
    webhook's own record on a GPU pod (``gpu``: CEL true for a GPU pod)."""
    notes = "object.metadata.annotations"
    record = f"k in {_list(protected.WEBHOOK_RECORDS)} && {gpu}"
    return f"has({notes}) && {notes}.exists(k, {protected_key('k')} && !({record}))"


def changed() -> str:
    """CEL, on an UPDATE: a protected annotation is set, changed or removed."""
    new, old = "object.metadata.annotations", "oldObject.metadata.annotations"
    kept = f"has({old}) && k in {old} && {old}[k] == {new}[k]"
    there = f"has({new}) && k in {new}"
    return (f"(has({new}) && {new}.exists(k, {protected_key('k')} && !({kept}))) || "
            f"(has({old}) && {old}.exists(k, {protected_key('k')} && !({there})))")


def touches(gpu: str) -> str:
    """CEL: the request writes vgpu's annotations where only a writer may (CREATE:
    :func:`created_with`; UPDATE: :func:`changed`)."""
    return f"oldObject == null ? ({created_with(gpu)}) : ({changed()})"


def ephemeral_added(gpu: str) -> str:
    """CEL, on ``pods/ephemeralcontainers``: an ephemeral container joins a GPU pod."""
    new, old = "object.spec.ephemeralContainers", "oldObject.spec.ephemeralContainers"
    known = f"has({old}) && {old}.exists(o, o.name == c.name)"
    return f"{gpu} && has({new}) && {new}.exists(c, !({known}))"


def validate_conditions(config: Config) -> list[dict[str, str]]:
    """``matchConditions`` of the validating webhook: called only for what it would deny,
    so the components' own writes and every other pod write never leave the API server."""
    return [
        {"name": "not-a-vgpu-component",
         "expression": f"!({writer_condition(config.webhook.annotation_writers)})"},
        {"name": "writes-vgpu-annotations-or-ephemeral-containers",
         "expression": f"request.subResource == '{EPHEMERAL}' || "
                       f"({touches(f'({match_expression(config.resource_names)})')})"},
    ]


ANNOTATIONS_MESSAGE = (
    "'annotations under vgpu.io/ (but vgpu.io/gpu-scheduler-policy, "
    "vgpu.io/node-scheduler-policy, vgpu.io/require-isolation and vgpu.io/fault-domain) "
    "belong to vgpu: only its "
    "scheduler and node agent set, change or remove them, not ' + request.userInfo.username "
    "+ '; create the pod without them, or leave them as they are (a pod keeps the GPU slice "
    "it was bound with: to change it, delete the pod and create it again)'")
EPHEMERAL_MESSAGE = (
    "an ephemeral container cannot join a pod that asks for vGPUs: it would run on the "
    "pod's node outside the GPU slice the scheduler accounted; use kubectl exec into the "
    "pod's containers, or debug in a pod of its own")


def admission_policy(config: Config) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy (Kubernetes 1.30+) that applies ``/validate``'s rules
    inside the API server, and its binding."""
    gpu = "variables.gpuPod"
    labels = {"app.kubernetes.io/name": "vgpu", "app.kubernetes.io/component": "webhook"}
    policy: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                # pods/status too: a status write can change annotations, and in the API
                # server the check costs next to nothing (the webhook stays off it).
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                   "operations": ["CREATE", "UPDATE"],
                                   "resources": ["pods", f"pods/{EPHEMERAL}",
                                                 "pods/status"]}],
                "namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": list(SYSTEM_NAMESPACES)}]},
            },
            "matchConditions": [validate_conditions(config)[0]],
            # Evaluated once, and only when an expression reads it.
            "variables": [{"name": "gpuPod",
                           "expression": match_expression(config.resource_names)}],
            "validations": [
                {"expression": f"request.subResource == '{EPHEMERAL}' || !({touches(gpu)})",
                 "messageExpression": ANNOTATIONS_MESSAGE, "reason": "Forbidden"},
                {"expression": f"request.subResource != '{EPHEMERAL}' || "
                               f"!({ephemeral_added(gpu)})",
                 "message": EPHEMERAL_MESSAGE, "reason": "Forbidden"},
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY, "labels": dict(labels)},
        "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
    }
    return [policy, binding]

