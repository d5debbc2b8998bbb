"""The GPU nodes of a :class:`tests.e2e.harness.FullStack`, simulated or real.

A :class:`NodeSpec` names a node and its fake GPUs (the devices file its ``vgpu
nodeagent`` reads); a :class:`SimNode` is one running, with its kubelet: the stand-in
(``tests/support/kubelet_node.py``) or, for ``NodeSpec(real=True)``, a real kubelet and
containerd (:class:`tests.controlplane.real_node.RealNode`) that run the pods.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.controlplane.real_node import RealNode
from tests.support.kubelet_node import NodeKubelet
from vgpu import meta, times
from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT
from vgpu.cluster.port import Obj
from vgpu.codecs import decode_inventory


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
    #: A real kubelet and containerd instead of the stand-in.
    real: bool = False
    #: The fake file's ``links`` entries (docs/contracts.md#fake-devices-file); None: the
    #: node publishes no links.
    links: tuple[Mapping[str, Any], ...] | None = None

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
        if self.links is None:
            return {"devices": devices}
        return {"devices": devices, "links": [dict(entry) for entry in self.links]}


@dataclass
class SimNode:
    spec: NodeSpec
    kubelet: NodeKubelet | RealNode
    #: The agent's /metrics port; 0: metrics off.
    metrics_port: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def stand_in(self) -> NodeKubelet:
        """The kubelet stand-in (what tests of admissions read); an error on a real node."""
        if not isinstance(self.kubelet, NodeKubelet):
            raise AssertionError(f"{self.name} runs a real kubelet, not the stand-in")
        return self.kubelet

    @property
    def real(self) -> RealNode:
        if not isinstance(self.kubelet, RealNode):
            raise AssertionError(f"{self.name} runs the kubelet stand-in, not a real kubelet")
        return self.kubelet

    def describe(self) -> str:
        """What a failed test's report shows of this node's kubelet."""
        if isinstance(self.kubelet, RealNode):
            return self.kubelet.logs(30)
        k = self.kubelet
        return (f"----- kubelet {self.name}: admitted {sorted(k.admissions)}, "
                f"errors {k.errors}, held {k.held_devices()}")



def live_gpu_nodes(nodes: Iterable[Obj], expiry: float) -> list[str]:
    """The nodes with GPUs in their inventory and a heartbeat younger than ``expiry``."""
    now = dt.datetime.now(dt.UTC)
    found = []
    for node in nodes:
        notes = meta.annotations_of(node)
        if NODE_GPUS not in notes:
            continue
        with contextlib.suppress(Exception):
            beat = times.parse(notes.get(NODE_HEARTBEAT))
            if (now - beat).total_seconds() < expiry and \
                    decode_inventory(notes[NODE_GPUS]).devices:
                found.append(meta.name(node))
    return found
