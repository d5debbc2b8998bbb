"""The registrations that hold vgpu's own components to what they do, generated as
CEL: the node agents to their own node (the webhook's ``/node-scope`` entry and a
ValidatingAdmissionPolicy, :mod:`vgpu_webhook.node_scope`), and the certificates Job to
the ``caBundle`` of the webhook configurations. ``manifests/webhook`` and
``manifests/policy`` carry them for the default configuration; tests keep the files in
step and evaluate the CEL against the rules it stands for.
"""

from __future__ import annotations

from typing import Any

from vgpu import protected
from vgpu.config import Config
from vgpu_webhook.registration import writer_condition

# -- the node agents' writes (vgpu_webhook.node_scope) ---------------------------------------

NODE_SCOPE = "vgpu-node-scope"
#: Every field of a pod's status in Kubernetes 1.32 but ``conditions``: the policy compares
#: each (CEL has no "the object less one field"); /node-scope compares all there are.
POD_STATUS_FIELDS = ("containerStatuses", "ephemeralContainerStatuses", "hostIP", "hostIPs",
                     "initContainerStatuses", "message", "nominatedNodeName",
                     "observedGeneration", "phase", "podIP", "podIPs", "qosClass", "reason",
                     "resize", "resourceClaimStatuses", "startTime")
#: The metadata a node agent leaves as it is (its annotations aside).
KEPT_METADATA = ("labels", "finalizers", "ownerReferences")


def node_scope_rules() -> list[dict[str, Any]]:
    return [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
             "resources": ["nodes", "pods", "pods/status"]}]


def node_scope_webhook(config: Config) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration's entry for ``/node-scope``: every write of a
    node agent (and, before 1.28, which drops matchConditions, every Node and pod status
    update: the overlays for those releases make it failurePolicy Ignore)."""
    return {
        "name": "node-scope.vgpu.io",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "vgpu-webhook", "namespace": "vgpu-system",
                                     "path": "/node-scope", "port": 443}},
        "rules": [{**rule, "scope": "*"} for rule in node_scope_rules()],
        "matchPolicy": "Equivalent",
        "matchConditions": [{"name": "a-node-agent",
                             "expression": writer_condition(config.webhook.node_agents)}],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": 5,
    }


def _same(field: str) -> str:
    new, old = f"object.{field}", f"oldObject.{field}"
    parent, _, name = field.rpartition(".")
    return (f"(has(object.{parent}.{name}) == has(oldObject.{parent}.{name}) && "
            f"(!has(object.{parent}.{name}) || {new} == {old}))")


def _vgpu_notes_only() -> str:
    """CEL: the write sets, changes or removes no annotation outside ``vgpu.io/``."""
    new, old = "object.metadata.annotations", "oldObject.metadata.annotations"
    foreign = f"!k.startsWith('{protected.PREFIX}')"
    return (f"!(has({new}) && {new}.exists(k, {foreign} && !(has({old}) && k in {old} && "
            f"{old}[k] == {new}[k]))) && !(has({old}) && {old}.exists(k, {foreign} && "
            f"!(has({new}) && k in {new})))")


def _conditions_kept() -> str:
    """CEL: a pod's conditions but ``vgpu.io/`` ones are as they were."""
    def others(obj: str) -> str:
        return (f"(has({obj}.status.conditions) ? {obj}.status.conditions.filter(c, "
                f"!c.type.startsWith('{protected.PREFIX}')) : [])")
    return f"{others('object')} == {others('oldObject')}"


def node_scope_policy(config: Config) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy (1.30+) holding the node agents to their own node:
    the node its token names (``authentication.kubernetes.io/node-name``, from 1.30 on),
    and its binding."""
    labels = {"app.kubernetes.io/name": "vgpu", "app.kubernetes.io/component": "nodeagent"}
    key = "authentication.kubernetes.io/node-name"
    extra = "request.userInfo.extra"
    kept = " && ".join([_same(f"metadata.{f}") for f in KEPT_METADATA] + [_vgpu_notes_only()])
    status = " && ".join([_same(f"status.{f}") for f in POD_STATUS_FIELDS]
                         + [_conditions_kept()])
    message = ("'the node agent of node ' + (variables.node == '' ? '(none: its token names "
               "no node; Kubernetes 1.30+ with ServiceAccountTokenPodNodeInfo)' : "
               "variables.node) + ' may write only its own Node and the pods bound to its "
               "node, and there only vgpu.io/ annotations and vgpu.io/ conditions, not ' + "
               "request.resource.resource + (request.subResource == '' ? '' : '/' + "
               "request.subResource) + ' ' + request.name")
    policy: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NODE_SCOPE, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": node_scope_rules()},
            "matchConditions": [{"name": "a-node-agent",
                                 "expression": writer_condition(config.webhook.node_agents)}],
            "variables": [{"name": "node", "expression":
                           f"has({extra}) && '{key}' in {extra} && size({extra}['{key}']) "
                           f"== 1 ? {extra}['{key}'][0] : ''"}],
            "validations": [
                {"expression": "variables.node != '' && (request.resource.resource == "
                               "'nodes' ? oldObject.metadata.name == variables.node : "
                               "(has(oldObject.spec.nodeName) && oldObject.spec.nodeName == "
                               "variables.node))",
                 "messageExpression": message, "reason": "Forbidden"},
                {"expression": f"{kept} && {_whole('spec')} && (request.resource.resource == "
                               f"'nodes' ? {_whole('status')} : ({status}))",
                 "messageExpression": message, "reason": "Forbidden"},
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NODE_SCOPE, "labels": dict(labels)},
        "spec": {"policyName": NODE_SCOPE, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def _whole(field: str) -> str:
    """CEL: a top-level field (a Node's taints, a pod's containers) is as it was."""
    return (f"(has(object.{field}) == has(oldObject.{field}) && (!has(object.{field}) || "
            f"object.{field} == oldObject.{field}))")


# -- the certificates Job's writes ---------------------------------------------------------

CA_BUNDLE = "vgpu-certs-ca-bundle"
#: Who keeps the webhook configurations' caBundle: the certs Job's service account.
CERTS_USER = "system:serviceaccount:vgpu-system:vgpu-certs"
#: The fields of a webhook entry (mutating and validating, 1.32), ``clientConfig`` aside.
WEBHOOK_FIELDS = ("admissionReviewVersions", "failurePolicy", "matchConditions",
                  "matchPolicy", "name", "namespaceSelector", "objectSelector",
                  "reinvocationPolicy", "rules", "sideEffects", "timeoutSeconds")


def _kept(a: str, b: str, field: str) -> str:
    return f"(has({a}.{field}) == has({b}.{field}) && (!has({a}.{field}) || " \
           f"{a}.{field} == {b}.{field}))"


def ca_bundle_policy(certs_user: str = CERTS_USER) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy (1.30+) that lets the certs Job change only the
    ``caBundle`` of the webhook configurations it may update: not where a webhook is
    called, which pods it sees, nor how it fails. Admission webhooks are never called for
    webhook configurations; a policy is."""
    labels = {"app.kubernetes.io/name": "vgpu", "app.kubernetes.io/component": "certs"}
    same = " && ".join(
        [_kept("w", "o", f) for f in WEBHOOK_FIELDS]
        + [_kept("w", "o", f"clientConfig.{f}") for f in ("service", "url")])
    metadata = " && ".join(_kept("object", "oldObject", f"metadata.{f}")
                           for f in ("labels", "annotations", *KEPT_METADATA[1:]))
    webhooks = ("(has(object.webhooks) ? size(object.webhooks) : 0) == "
                "(has(oldObject.webhooks) ? size(oldObject.webhooks) : 0) && "
                "(!has(object.webhooks) || object.webhooks.all(w, has(oldObject.webhooks) && "
                f"oldObject.webhooks.exists(o, {same})))")
    policy: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": CA_BUNDLE, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["mutatingwebhookconfigurations",
                              "validatingwebhookconfigurations"]}]},
            "matchConditions": [{"name": "the-certs-job",
                                 "expression": f"request.userInfo.username == '{certs_user}'"}],
            "validations": [{
                "expression": f"{metadata} && {webhooks}",
                "message": "the certificates Job may change only the caBundle of a webhook "
                           "configuration (docs/security.md#the-certificates-job)",
                "reason": "Forbidden"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": CA_BUNDLE, "labels": dict(labels)},
        "spec": {"policyName": CA_BUNDLE, "validationActions": ["Deny"]},
    }
    return [policy, binding]
