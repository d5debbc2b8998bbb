"""Topology-carrying nodes in a replay, and how well multi-GPU pods were linked.

The trace gives no topology, so ``vgpu simulate --topology SHAPE`` gives every node the
named shape for its GPU count (:mod:`vgpu.topology.shapes`). Each placed pod of several
GPUs is then judged against its node: it got its **best possible link** when the slowest
pair of its GPUs is as fast as the slowest pair of the fastest set of that many GPUs the
node has at all (what it would get on the node empty). The share of multi-GPU pods that
did is reported beside the unallocated-GPU figure. With ``--hide-links`` the nodes keep
their shape for this measure but publish no links, so the scheduler places as it did
before it knew of links: the baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.codecs import Assignment
from vgpu.topology import shapes
from vgpu.topology.choice import best_worst
from vgpu.topology.links import LinkMatrix, matrix
from vgpu_simulate.trace import TraceError, TraceNode


def check_shape(name: str | None) -> None:
    if name is not None and name not in shapes.SHAPES:
        raise TraceError(f"--topology {name!r}: unknown; known: {', '.join(shapes.SHAPES)}")


def gpu_uuid(node: str, index: int) -> str:
    """The UUID :func:`vgpu.builders.devices` gives a node's GPU."""
    return f"GPU-{node}-{index}"


@dataclass
class LinkTally:
    """Multi-GPU pods placed, and how many of them got their node's best possible link."""

    shape: str
    multi_gpu: int = 0
    best: int = 0

    def __post_init__(self) -> None:
        self._matrices: dict[int, LinkMatrix] = {}
        self._best: dict[tuple[int, int], int | None] = {}
        self._gpus: dict[str, int] = {}

    def add_nodes(self, nodes: Sequence[TraceNode]) -> None:
        for node in nodes:
            self._gpus[node.name] = node.gpus

    def _matrix(self, gpus: int) -> LinkMatrix:
        if gpus not in self._matrices:
            uuids = [str(i) for i in range(gpus)]
            self._matrices[gpus] = matrix(
                uuids, shapes.links_of(shapes.SHAPES[self.shape](gpus), uuids))
        return self._matrices[gpus]

    def record(self, assignment: Assignment) -> None:
        """Count the pod's containers of several GPUs (the trace's pods have one)."""
        gpus = self._gpus.get(assignment.node, 0)
        m = self._matrix(gpus)
        prefix = gpu_uuid(assignment.node, 0)[:-1]
        for granted in assignment.containers.values():
            if len(granted) < 2:
                continue
            positions = [int(g.uuid[len(prefix):]) for g in granted]
            key = (gpus, len(positions))
            if key not in self._best:
                self._best[key] = best_worst(list(range(gpus)), len(positions), m)
            self.multi_gpu += 1
            self.best += m.worst(positions) >= (self._best[key] or 0)

    @property
    def best_pct(self) -> float | None:
        return round(100.0 * self.best / self.multi_gpu, 2) if self.multi_gpu else None
