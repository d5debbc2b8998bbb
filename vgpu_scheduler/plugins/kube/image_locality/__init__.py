"""ImageLocality: a node that already holds the pod's container images scores higher, as
kube-scheduler's plugin of that name (current kube: init containers count too, and the
upper bound grows with the number of containers).

A node's score sums, over the pod's init and app containers whose image (``:latest``
added when it names no tag) the node's ``status.images`` lists, the image's size scaled by
the share of the cluster's nodes that hold it (an image every node has adds its size, one
on a single node of a hundred a hundredth: no "node heating" on the few nodes that pulled
it first), clamped between 23 MiB and 1000 MiB per container and scaled to 0..100.

Which nodes hold an image, and its size there, is kept per image name and computed again
only for nodes that changed (:mod:`vgpu_scheduler.framework.row_memo`); a pod scored while
no node reports images costs nothing. One difference from kube-scheduler: an image's size
is what each node reports for it, where kube-scheduler keeps the size the first node that
listed it reported (the same image, so the same size, but for a tag pushed again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.row_memo import RowMemo, Rows, per_node
from vgpu_scheduler.framework.snapshot import Column, Snapshot

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
MAX_NODE_SCORE = 100
_IMAGES = "imagelocality.images"
#: Image names whose holders are kept (one integer per node each).
_KEEP = 64


def normalized_image_name(name: str) -> str:
    """The name as node status lists it: ``:latest`` when it gives no tag."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def _images(node: Obj) -> list[Any]:
    status = node.get("status")
    images = status.get("images") if isinstance(status, dict) else None
    return images if isinstance(images, list) else []


def size_on(node: Obj, name: str) -> int:
    """The size the node reports for image ``name``, -1 when it lists no such image."""
    for image in _images(node):
        if not isinstance(image, dict):
            continue
        names = image.get("names")
        if isinstance(names, list) and name in names:
            size = image.get("sizeBytes")
            return size if isinstance(size, int) and size >= 0 else 0
    return -1


def pod_images(pod: PodInfo) -> tuple[list[str], int]:
    """The normalized image names of the pod's init and app containers, and how many
    containers it has (a container without an image counts, as in kube-scheduler)."""
    spec = pod.pod.get("spec")
    names: list[str] = []
    count = 0
    for field in ("initContainers", "containers"):
        containers = spec.get(field) if isinstance(spec, dict) else None
        for container in containers if isinstance(containers, list) else ():
            count += 1
            image = container.get("image") if isinstance(container, dict) else None
            if isinstance(image, str) and image:
                names.append(normalized_image_name(image))
    return names, count


def priority(total: npt.NDArray[np.int64], containers: int) -> npt.NDArray[np.int64]:
    """kube-scheduler's ``calculatePriority``: 0..100 from the summed scaled sizes."""
    top = MAX_CONTAINER_THRESHOLD * max(containers, 1)
    clamped = np.clip(total, MIN_THRESHOLD, top)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


class ImageLocality:
    name = "ImageLocality"

    def __init__(self, handle: Handle) -> None:
        del handle
        self._holders = RowMemo(_KEEP)

    def columns(self) -> Sequence[Column]:
        return (Column(_IMAGES, np.int32, lambda n: len(_images(n.static.node)), 0),)

    def _sizes(self, snapshot: Snapshot, name: str) -> npt.NDArray[np.int64]:
        def compute(rows: Rows) -> npt.NDArray[np.int64]:
            return per_node(snapshot, rows, lambda n: size_on(n.static.node, name),
                            np.int64, -1)

        sizes: npt.NDArray[np.int64] = self._holders.get(name, snapshot, compute)
        return sizes

    def _sums(self, snapshot: Snapshot, names: list[str],
              positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Per position, the pod's images' sizes there, each scaled by its spread."""
        total = np.zeros(len(positions), dtype=np.int64)
        nodes = len(snapshot)
        for name in names:
            sizes = self._sizes(snapshot, name)
            spread = float(np.count_nonzero(sizes >= 0)) / float(nodes)
            here = sizes[positions]
            # Go's int64(float64(size) * spread): truncated toward zero.
            scaled = np.trunc(here.astype(np.float64) * spread).astype(np.int64)
            total += np.where(here >= 0, scaled, 0)
        return total

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64] | None:
        if not snapshot.column(_IMAGES).any():
            return None  # every node scores 0: nothing to compare
        names, containers = pod_images(pod)
        return priority(self._sums(snapshot, names, positions), containers).astype(np.float64)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        snapshot = state.snapshot
        pos = None if snapshot is None else snapshot.positions.get(node.name)
        if snapshot is None or pos is None:
            return 0.0
        names, containers = pod_images(pod)
        total = self._sums(snapshot, names, np.array([pos], dtype=np.int64))
        return float(priority(total, containers)[0])
