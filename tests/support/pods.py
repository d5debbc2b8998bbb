"""Pods as the scheduler leaves them: bound with an assignment in ``bind-phase: allocating``.

The node-agent tests play the scheduler's part with these; the end-to-end tests run the
real scheduler instead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.annotations import ASSIGNMENT, BIND_PHASE, BIND_TIME, PHASE_ALLOCATING
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.codecs import Assignment, GrantedDevice, encode_assignment, encode_heartbeat
from vgpu.config import Config
from vgpu.requests import parse_pod


def container(name: str, gpus: int | None = None, *, mem: int | None = None,
              cores: int | None = None, priority: int | None = None) -> dict[str, Any]:
    limits: dict[str, str] = {}
    if gpus is not None:
        limits["nvidia.com/gpu"] = str(gpus)
    if mem is not None:
        limits["nvidia.com/gpumem"] = str(mem)
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    if priority is not None:
        limits["nvidia.com/priority"] = str(priority)
    spec: dict[str, Any] = {"name": name, "image": "cuda"}
    if limits:
        spec["resources"] = {"limits": limits}
    return spec


def pod(name: str, containers: Sequence[Mapping[str, Any]],
        init_containers: Sequence[Mapping[str, Any]] = (), namespace: str = "default") -> Obj:
    spec: dict[str, Any] = {"containers": [dict(c) for c in containers],
                            "schedulerName": "vgpu-scheduler"}
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def slices(*items: tuple[str, int, int]) -> tuple[GrantedDevice, ...]:
    return tuple(GrantedDevice(uuid=u, memory_mib=m, cores=c) for u, m, c in items)


def bind_assigned(cluster: ClusterPort, pod_obj: Obj, node: str,
                  containers: Mapping[str, Sequence[GrantedDevice]],
                  when: dt.datetime | None = None, *,
                  assignment_text: str | None = None) -> Obj:
    """Create ``pod_obj`` and bind it as the vgpu scheduler does (one binding carrying the
    assignment, ``bind-phase: allocating`` and ``bind-time``)."""
    created = cluster.create("pods", pod_obj)
    meta = created["metadata"]
    # The scheduler copies each container's task priority into the assignment.
    priorities = {name: p for name, p in parse_pod(pod_obj, Config()).priorities().items()
                  if name in containers}
    text = assignment_text if assignment_text is not None else encode_assignment(
        Assignment(node=node, containers={k: tuple(v) for k, v in containers.items()},
                   priorities=priorities))
    cluster.bind(meta["namespace"], meta["name"], node, {
        ASSIGNMENT: text, BIND_PHASE: PHASE_ALLOCATING,
        BIND_TIME: encode_heartbeat(when or dt.datetime.now(dt.UTC)),
    })
    return cluster.get("pods", meta["name"], meta["namespace"])
