"""A known small cluster for the inspect tests (unit and end-to-end).

Two GPU nodes, one CPU node, a node whose inventory is malformed; pods placed on GPUs,
one finished (holds nothing), one pending, one with a malformed assignment.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

NOW = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
FRESH = "2024-05-01T11:59:30Z"
OLD = "2024-05-01T11:00:00Z"


def gpu(uuid: str, index: int, model: str, memory: int, healthy: bool = True, *,
        isolation: str | None = None) -> dict[str, Any]:
    out = {"uuid": uuid, "index": index, "model": model, "memory_mib": memory, "cores": 100,
           "split": 10, "numa": 0, "healthy": healthy}
    return out if isolation is None else {**out, "isolation": isolation}


def node(name: str, devices: list[dict[str, Any]] | None, heartbeat: str | None = FRESH,
         raw: str | None = None) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if devices is not None:
        # Version 2 reports each GPU's isolation mode; an older agent's version 1 does not.
        version = 2 if devices and all("isolation" in d for d in devices) else 1
        ann["vgpu.io/node-gpus"] = json.dumps({"version": version, "devices": devices})
    if raw is not None:
        ann["vgpu.io/node-gpus"] = raw
    if heartbeat is not None and (devices is not None or raw is not None):
        ann["vgpu.io/node-heartbeat"] = heartbeat
    return {"metadata": {"name": name, "annotations": ann, "labels": {"gpu": "on"}}}


def pod(name: str, node_name: str | None,
        containers: dict[str, list[tuple[str, int, int]]] | None, *,
        phase: str = "Running", namespace: str = "default", raw: str | None = None,
        bind_phase: str = "success", run_as_user: int | None = None) -> dict[str, Any]:
    ann: dict[str, str] = {}
    if containers is not None:
        assignment: dict[str, Any] = {
            "version": 1, "node": node_name,
            "containers": {c: [{"uuid": u, "memory_mib": m, "cores": k} for u, m, k in slices]
                           for c, slices in containers.items()}}
        if run_as_user is not None:
            assignment["run_as_user"] = run_as_user
        ann["vgpu.io/assignment"] = json.dumps(assignment)
        ann["vgpu.io/bind-phase"] = bind_phase
    if raw is not None:
        ann["vgpu.io/assignment"] = raw
    spec: dict[str, Any] = {"schedulerName": "vgpu-scheduler",
                            "containers": [{"name": c} for c in (containers or {"main": []})]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": namespace, "annotations": ann},
            "spec": spec, "status": {"phase": phase}}


A0, A1, B0 = "GPU-a0", "GPU-a1", "GPU-b0"

NODES = [
    node("gpu-a", [gpu(A0, 0, "NVIDIA A100-SXM4-40GB", 40960, isolation="mps"),
                   gpu(A1, 1, "NVIDIA A100-SXM4-40GB", 40960, isolation="mps")]),
    node("gpu-b", [gpu(B0, 0, "Tesla T4", 15360, healthy=False)], heartbeat=OLD),
    node("cpu-1", None),
    node("gpu-broken", None, raw="{not json"),
]

PODS = [
    # One uid on the MPS GPUs of gpu-a, as the scheduler places them (MpsUser).
    pod("train", "gpu-a", {"worker": [(A0, 20000, 50), (A1, 10000, 30)]}, namespace="ml",
        run_as_user=1000),
    pod("infer", "gpu-a", {"main": [(A0, 4096, 10)], "sidecar": [(A0, 1024, 0)]},
        bind_phase="allocating", phase="Pending", run_as_user=1000),
    pod("t4-job", "gpu-b", {"main": [(B0, 8000, 0)]}),
    pod("done", "gpu-a", {"main": [(A1, 30000, 70)]}, phase="Succeeded"),
    pod("crashed", "gpu-a", {"main": [(A1, 30000, 70)]}, phase="Failed"),
    pod("waiting", None, None, phase="Pending"),
    pod("garbled", "gpu-b", None, raw='{"version": 1, "node": "gpu-b"}'),
    pod("ghost", "gpu-b", {"main": [("GPU-gone", 1000, 0)]}),
    pod("cpu-only", "cpu-1", None),
]
