"""What each vgpu ServiceAccount may and may not do, asked of a real API server's
authorizer (``test_ops_install``): the rights each component's code needs
(``tests/ops/test_manifests_rbac.py`` derives them from the code) and the writes no
component needs, above all those a stolen token would be used for.
"""

from __future__ import annotations

from typing import Any

import kubernetes.client

from tests.controlplane.cluster import ControlPlane


def user(name: str) -> str:
    """The account's user: the node agent's is in vgpu-node, the others' in vgpu-system."""
    namespace = "vgpu-node" if name == "vgpu-nodeagent" else "vgpu-system"
    return f"system:serviceaccount:{namespace}:{name}"


REVIEWS = [("create", "tokenreviews.authentication.k8s.io"),
           ("create", "subjectaccessreviews.authorization.k8s.io")]


CAN = {
    "vgpu-scheduler": [
        ("list", "pods", "-A"), ("watch", "pods", "-A"), ("get", "pods", "-n", "team-a"),
        ("create", "pods", "--subresource=binding", "-A"),
        ("patch", "pods", "--subresource=status", "-n", "team-a"),
        ("list", "nodes"), ("watch", "nodes"),
        ("create", "events", "-n", "team-a"),
        ("create", "leases.coordination.k8s.io", "-n", "vgpu-system"),
        ("get", "leases.coordination.k8s.io/vgpu-scheduler", "-n", "vgpu-system"),
        ("update", "leases.coordination.k8s.io/vgpu-scheduler", "-n", "vgpu-system"), *REVIEWS,
    ],
    # get nodes: /node-scope reads the Node a node agent writes (vgpu_webhook/node_scope.py).
    "vgpu-webhook": [("list", "nodes"), ("watch", "nodes"), ("get", "nodes/some-node"),
                     ("get", "pods", "-n", "vgpu-node"), *REVIEWS],
    "vgpu-nodeagent": [
        ("list", "pods", "-A"), ("watch", "pods", "-A"), ("get", "pods", "-n", "team-a"),
        ("patch", "pods", "--subresource=status", "-n", "team-a"), ("patch", "nodes"),
        ("get", "nodes/node-a"),
        ("create", "events", "-n", "team-a"), ("create", "pods", "--subresource=eviction", "-A"),
        *REVIEWS],
    "vgpu-certs": [
        ("create", "secrets", "-n", "vgpu-system"),
        ("get", "secrets/vgpu-webhook-tls", "-n", "vgpu-system"),
        ("update", "secrets/vgpu-webhook-tls", "-n", "vgpu-system"),
        ("get", "mutatingwebhookconfigurations.admissionregistration.k8s.io/vgpu-webhook"),
        ("update", "mutatingwebhookconfigurations.admissionregistration.k8s.io/vgpu-webhook"),
        ("get", "validatingwebhookconfigurations.admissionregistration.k8s.io/vgpu-webhook"),
        ("update", "validatingwebhookconfigurations.admissionregistration.k8s.io/vgpu-webhook"),
    ],
}

EVERYONE_CANNOT = [
    ("create", "pods", "-n", "team-a"), ("delete", "pods", "-n", "team-a"),
    ("delete", "nodes"), ("create", "nodes"), ("update", "nodes"),
    ("get", "secrets", "-A"), ("list", "secrets", "-A"), ("get", "secrets", "-n", "kube-system"),
    ("list", "configmaps", "-A"), ("create", "deployments.apps", "-n", "vgpu-system"),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
    ("escalate", "clusterroles.rbac.authorization.k8s.io"),
    ("impersonate", "serviceaccounts", "-A"),
    ("create", "pods", "--subresource=exec", "-A"),
    ("create", "mutatingwebhookconfigurations.admissionregistration.k8s.io"),
    ("*", "*", "-A"),
]

CANNOT = {
    "vgpu-scheduler": [("patch", "nodes"), ("update", "leases.coordination.k8s.io/other",
                                                      "-n", "vgpu-system"),
                       ("create", "leases.coordination.k8s.io", "-n", "kube-system"),
                       # With a pod patch a stolen token could change any pod's image.
                       ("update", "pods", "-n", "team-a"), ("patch", "pods", "-n", "team-a"),
                       ("patch", "pods", "-n", "kube-system"),
                       ("patch", "events", "-n", "team-a"), ("get", "nodes/node-a"),
                       ("create", "events.events.k8s.io", "-n", "team-a")],
    "vgpu-webhook": [("get", "pods", "-A"), ("get", "pods", "-n", "team-a"), ("patch", "nodes"),
                     ("list", "pods", "-n", "vgpu-node")],
    "vgpu-nodeagent": [("list", "nodes"), ("create", "pods", "--subresource=binding", "-A"),
                       ("update", "pods", "-n", "team-a"), ("patch", "pods", "-n", "team-a"),
                       ("patch", "events", "-A")],
    "vgpu-certs": [("get", "secrets/other", "-n", "vgpu-system"),
                   ("update", "secrets/other", "-n", "vgpu-system"),
                   ("create", "secrets", "-n", "team-a"),
                   ("delete", "secrets/vgpu-webhook-tls", "-n", "vgpu-system"),
                   ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/other"),
                   ("update", "mutatingwebhookconfigurations.admissionregistration.k8s.io/other"),
                   ("patch",
                    "mutatingwebhookconfigurations.admissionregistration.k8s.io/vgpu-webhook"),
                   ("list", "mutatingwebhookconfigurations.admissionregistration.k8s.io"),
                   ("update", "validatingwebhookconfigurations.admissionregistration.k8s.io/x"),
                   ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io")],
}


def _review(check: tuple[str, ...]) -> dict[str, Any]:
    """A `kubectl auth can-i` argument list as a SubjectAccessReview resourceAttributes."""
    verb, what, *flags = check
    resource, _, name = what.partition("/")
    resource, _, group = resource.partition(".")
    attrs: dict[str, Any] = {"verb": verb, "resource": resource, "group": group, "name": name}
    for flag in flags:
        if flag.startswith("--subresource="):
            attrs["subresource"] = flag.split("=", 1)[1]
    if "-n" in flags:
        attrs["namespace"] = flags[flags.index("-n") + 1]
    return attrs


def can_i(cp: ControlPlane, account: str, check: tuple[str, ...]) -> bool:
    """What `kubectl auth can-i CHECK --as=system:serviceaccount:NAMESPACE:ACCOUNT` says,
    asked of the same authorizer in-process (a kubectl per check costs a second here)."""
    name = user(account)
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": name, "groups": ["system:serviceaccounts",
                                              f"system:serviceaccounts:{name.split(':')[2]}",
                                              "system:authenticated"],
                     "resourceAttributes": _review(check)}}
    with cp.api_client() as client:
        review = kubernetes.client.AuthorizationV1Api(client).create_subject_access_review(
            kubernetes.client.V1SubjectAccessReview.from_dict(body))
    return bool(review.status.allowed)
