"""Pods as users write them for the full-stack tests, and what those tests read back.

Kept apart from ``test_full_stack`` so that the module holds the tests themselves: the
pod builders (GPU limits under their ``nvidia.com/`` names), a pod's assignment and
limits, its FailedScheduling messages, and a simulated node found by its name's prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.e2e.harness import FullStack, NodeSpec
from vgpu.annotations import ASSIGNMENT
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment, decode_assignment


def node_named(stack: FullStack, prefix: str) -> NodeSpec:
    (spec,) = [s for s in stack.node_specs if s.name.startswith(f"{prefix}-")]
    return spec


def gpu_container(name: str = "main", **limits: str | int) -> dict[str, Any]:
    return {"name": name, "image": "nvidia/cuda:12.2.0-base-ubuntu22.04",
            "command": ["sleep", "infinity"],
            "resources": {"limits": {f"nvidia.com/{k.replace('_', '-')}": str(v)
                                     for k, v in limits.items()}}}


def gpu_pod(name: str, *containers: dict[str, Any],
            annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": list(containers) or [gpu_container(gpu=1)]}}


def assignment_of(pod: Obj) -> Assignment:
    return decode_assignment(pod["metadata"]["annotations"][ASSIGNMENT])


def limits_of(pod: Obj, container: str = "main") -> dict[str, str]:
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return dict(c["resources"]["limits"])


def failed_scheduling(stack: FullStack, namespace: str, name: str) -> list[str]:
    return [e["message"] for e in stack.events(namespace, name)
            if e.get("reason") == "FailedScheduling"]
