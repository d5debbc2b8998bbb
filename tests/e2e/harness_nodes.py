"""The simulated GPU nodes of a :class:`tests.e2e.harness.FullStack`.

A :class:`NodeSpec` names a node and its fake GPUs (the devices file its ``vgpu
nodeagent`` reads); a :class:`SimNode` is one running, with its kubelet stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.kubelet_node import NodeKubelet


@dataclass(frozen=True)
class Gpu:
    model: str
    memory_mib: int
    numa: int = 0
    #: What the fake backend reports for the agent's GPU metrics; None: left out.
    memory_used_mib: int | None = None
    utilization: int | None = None


@dataclass(frozen=True)
class NodeSpec:
    """A simulated GPU node; its GPUs get UUIDs ``GPU-<node>-<index>``."""

    name: str
    gpus: tuple[Gpu, ...]
    labels: Mapping[str, str] = field(default_factory=dict)

    def uuids(self) -> list[str]:
        return [f"GPU-{self.name}-{i}" for i in range(len(self.gpus))]

    def devices_file(self) -> dict[str, Any]:
        devices = []
        for i, (u, g) in enumerate(zip(self.uuids(), self.gpus, strict=True)):
            device: dict[str, Any] = {"uuid": u, "index": i, "model": g.model,
                                      "memory_mib": g.memory_mib, "numa": g.numa}
            for key in ("memory_used_mib", "utilization"):
                if getattr(g, key) is not None:
                    device[key] = getattr(g, key)
            devices.append(device)
        return {"devices": devices}


@dataclass
class SimNode:
    spec: NodeSpec
    kubelet: NodeKubelet
    #: The agent's /metrics port; 0: metrics off.
    metrics_port: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

