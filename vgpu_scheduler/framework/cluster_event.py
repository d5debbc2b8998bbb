"""The cluster changes that may help a pod that failed (kube's ``ClusterEvent``, the input
of its QueueingHints)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment


@dataclass(frozen=True)
class ClusterEvent:
    """A change that may make unschedulable pods schedulable (kube's QueueingHint input)."""

    #: "pod", "node", or the plural of another kind a plugin watches (``Handle.lister``).
    resource: str
    action: Literal["add", "update", "delete"]
    #: The node the change is on (pods and nodes); empty for other kinds.
    node: str
    #: Node updates: which facts changed (labels, taints, unschedulable, allocatable,
    #: inventory, heartbeat).
    changes: frozenset[str] = frozenset()
    #: Pod deletions: the GPU slices that were freed.
    freed: Assignment | None = None
    obj: Obj | None = None
