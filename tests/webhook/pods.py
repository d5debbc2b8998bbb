"""Pod, review and cluster builders shared by the webhook tests."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.webhook.jsonpatch import apply
from vgpu.codecs import NodeInventory
from vgpu.config import Config
from vgpu.devices import Device
from vgpu_webhook.gpus import ClusterGpus
from vgpu_webhook.mutate import decide
from vgpu_webhook.review import answer, parse

A100 = "NVIDIA A100-SXM4-40GB"
T4 = "Tesla T4"


def ctr(name: str, limits: dict[str, Any] | None = None,
        requests: dict[str, Any] | None = None, *, privileged: bool = False,
        env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "cuda:12"}
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    if resources:
        container["resources"] = resources
    if privileged:
        container["securityContext"] = {"privileged": True}
    if env is not None:
        container["env"] = env
    return container


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (),
        name: str | None = "p", generate_name: str | None = None,
        annotations: dict[str, str] | None = None, scheduler: str | None = None,
        node: str | None = None, namespace: str = "team-a") -> dict[str, Any]:
    metadata: dict[str, Any] = {"namespace": namespace}
    if name is not None:
        metadata["name"] = name
    if generate_name is not None:
        metadata["generateName"] = generate_name
        metadata["labels"] = {"app": "trainer", "pod-template-hash": "5d4f8"}
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": "trainer-5d4f8", "uid": "rs-uid",
                                        "controller": True}]
    if annotations is not None:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"containers": list(containers), "restartPolicy": "Always"}
    if init:
        spec["initContainers"] = list(init)
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def review(obj: Any, *, operation: str = "CREATE", kind: str = "Pod", group: str = "",
           uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
           namespace: str = "team-a") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
            "requestKind": {"group": group, "version": "v1", "kind": kind},
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "admin"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }


def node_inventory(model: str, memory_mib: int, count: int, prefix: str) -> NodeInventory:
    return NodeInventory(devices=tuple(
        Device(uuid=f"GPU-{prefix}-{i}", index=i, model=model, memory_mib=memory_mib)
        for i in range(count)))


NO_GPUS = ClusterGpus()
#: Two nodes of four A100 40 GB each.
HOMOGENEOUS = ClusterGpus.from_inventories([
    node_inventory(A100, 40960, 4, "a0"), node_inventory(A100, 40960, 4, "a1")])
#: One node of four A100 40 GB, one of two T4 16 GB (15360 MiB).
MIXED = ClusterGpus.from_inventories([
    node_inventory(A100, 40960, 4, "a0"), node_inventory(T4, 15360, 2, "t0")])


def admit(obj: Any, gpus: ClusterGpus = NO_GPUS, config: Config | None = None,
          **review_args: Any) -> tuple[dict[str, Any], Any]:
    """Run one review through parse → decide → answer as the server does; return the
    decoded response and the object with the patch applied (strictly)."""
    cfg = config or Config()
    body = json.dumps(review(obj, **review_args)).encode()
    parsed = parse(body)
    out = json.loads(answer(parsed.uid, decide(parsed.request, cfg, gpus)))
    response = out["response"]
    patched = obj
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        patched = apply(obj, json.loads(base64.b64decode(response["patch"])))
    return response, patched
