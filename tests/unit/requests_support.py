"""Pods and containers for the request-parsing tests, and the resource names they use.

Shared by ``test_requests`` (accepted shapes), ``test_request_errors`` (rejections) and
``test_request_checks`` (the webhook's cheap questions and the GPU selector).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from vgpu.config import Config, ResourceNames

GPU = "nvidia.com/gpu"
MEM = "nvidia.com/gpumem"
PCT = "nvidia.com/gpumem-percentage"
CORES = "nvidia.com/gpucores"
PRIO = "nvidia.com/priority"

DEFAULT = Config()
CUSTOM = Config(resource_names=ResourceNames(
    gpu="example.com/vgpu", gpumem="example.com/vmem",
    gpumem_percentage="example.com/vmem-pct", gpucores="example.com/vcores",
    priority="example.com/vprio",
))


def ctr(name: str = "main", limits: dict[str, Any] | None = None,
        requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "image": "ubuntu:22.04", "resources": resources, **extra}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (),
        annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    metadata: dict[str, Any] = {"name": "gpu-pod", "namespace": "default"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


#: Arbitrary JSON-like values, weighted towards the keys a pod's resources use.
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
    | st.sampled_from([GPU, MEM, "spec", "containers", "resources", "limits", "requests"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["spec", "containers", "initContainers", "resources", "limits",
                         "requests", "name", GPU, MEM]) | st.text(max_size=3),
        inner, max_size=4),
    max_leaves=20,
)
