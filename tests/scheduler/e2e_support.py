"""The whole scheduler on the in-memory cluster: setting one up, and reading pods back.

Shared by ``test_e2e`` (placement and what is reported) and ``test_e2e_binding`` (the
permit gate, restarts and failed bindings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import vgpu.annotations as ann
from tests.scheduler.helpers import FakeClock
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu_scheduler.host.scheduler import Scheduler


def setup(nodes: list[Obj], config: Config | None = None,
          cluster: MemoryCluster | None = None) -> tuple[Scheduler, MemoryCluster, FakeClock]:
    clock = FakeClock()
    cluster = cluster or MemoryCluster()
    for n in nodes:
        cluster.create("nodes", n)
    return Scheduler(config or Config(), cluster, clock=clock), cluster, clock


def gpu_node(name: str, gpus: int = 2, *, memory_mib: int = 16384, model: str = "Tesla T4",
             heartbeat: float | None = None, **kw: Any) -> Obj:
    hb = FakeClock().now if heartbeat is None else heartbeat
    return builders.node(name, builders.devices(name, gpus, model=model, memory_mib=memory_mib),
                      heartbeat=hb, **kw)


def node_of(cluster: MemoryCluster, name: str) -> str | None:
    node: str | None = cluster.get("pods", name, "default")["spec"].get("nodeName")
    return node


def uid_of(cluster: MemoryCluster, name: str, namespace: str = "default") -> str:
    """The pod's uid: what the scheduler's cache, queue and waiting room key it by."""
    return str(cluster.get("pods", name, namespace)["metadata"]["uid"])


def annotations(cluster: MemoryCluster, name: str) -> Mapping[str, str]:
    result: Mapping[str, str] = cluster.get("pods", name, "default")["metadata"]["annotations"]
    return result


def allocated(cluster: MemoryCluster, name: str, phase: str = ann.PHASE_SUCCESS) -> None:
    """What the node agent does after Allocate."""
    cluster.patch_annotations("pods", name, {ann.BIND_PHASE: phase}, "default")
