"""TokenReview and SubjectAccessReview: the API server's answers to "who is this token" and
"may this user get this path", for the metrics servers' delegated authentication and
authorization (:mod:`vgpu.metrics_auth`)."""

from __future__ import annotations

from typing import Any

from vgpu.errors import ClusterError
from vgpu.kube.adapter import KubeCluster
from vgpu.metrics_auth import User

#: A review waits at most this long: the scrape that asked is waiting too.
TIMEOUT = 5.0


class KubeReviewer:
    def __init__(self, cluster: KubeCluster) -> None:
        self._cluster = cluster

    def review_token(self, token: str) -> User | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token}}
        answer = self._cluster.request_json(
            "POST", "/apis/authentication.k8s.io/v1/tokenreviews", "review a token",
            body=body, timeout=TIMEOUT)
        status = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(status, dict):
            raise ClusterError("review a token: the API server's answer has no status")
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return User(name=str(user.get("username") or ""), uid=str(user.get("uid") or ""),
                    groups=tuple(str(g) for g in user.get("groups") or ()),
                    extra={str(k): tuple(str(v) for v in values or ())
                           for k, values in extra.items()})

    def review_access(self, user: User, path: str, verb: str) -> bool:
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        answer = self._cluster.request_json(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            f"review access to {path}",
            body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": spec}, timeout=TIMEOUT)
        status = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(status, dict):
            raise ClusterError(f"review access to {path}: the answer has no status")
        return bool(status.get("allowed"))
