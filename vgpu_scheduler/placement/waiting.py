"""Which pod shapes wait, and for how long: learned from the pod events a scheduler sees.

A pod is pending from its creation until it is bound or deleted. Its shape is charged the
GPU it asks for times the time it spent pending (GPU-seconds); a pod pending now is charged
up to now. The policies that weigh the workload (:mod:`.stranding`) give these shapes
extra weight, so that placements keep room for what the cluster has made wait, from the
past only: a trace's future never reaches it.
"""

from __future__ import annotations

from collections.abc import Callable

from vgpu import pods
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.placement.shapes import MILLI, Shape

#: The waiting shapes weigh, together, this share of the pods seen (when any waited).
WEIGHT = 1.0
#: Each waiting shape's part of that weight is rounded to 1/STEPS, so that the workload
#: (and the scores it caches) is rebuilt when the waits shift, not at every second.
STEPS = 20


class WaitingShapes:
    def __init__(self, config: Config, shape_of: Callable[[PodInfo], Shape]) -> None:
        self._config = config
        self._shape_of = shape_of
        self._pending: dict[str, tuple[Shape, float]] = {}
        self._waited: dict[Shape, float] = {}

    def on_pod(self, old: Obj | None, new: Obj | None, now: float) -> bool:
        """A pod event; True when a pod that waited stopped waiting."""
        obj = new if new is not None else old
        if obj is None:
            return False
        key = pods.pod_id(obj)
        if new is None or pods.node_name(new):
            entry = self._pending.pop(key, None)
            if entry is None:
                return False
            shape, since = entry
            waited = now - since
            if waited > 0:
                self._waited[shape] = self._waited.get(shape, 0.0) + waited * _gpus(shape)
            return waited > 0
        if old is None:
            shape = self._shape_of(parse(new, self._config))
            if shape.gpus and shape.milli_gpu:
                self._pending[key] = (shape, now)
        return False

    @property
    def pending(self) -> int:
        return len(self._pending)

    def weights(self, now: float) -> dict[Shape, float]:
        """GPU-seconds spent pending per shape, those pending now up to ``now``."""
        out = dict(self._waited)
        for shape, since in self._pending.values():
            if now > since:
                out[shape] = out.get(shape, 0.0) + (now - since) * _gpus(shape)
        return out

    def extra(self, seen: int, now: float) -> list[Shape]:
        """Copies of the waiting shapes to add to ``seen`` pods' shapes: together
        ``WEIGHT`` × ``seen``, each shape in proportion to its GPU-seconds spent pending."""
        weights = self.weights(now)
        total = sum(weights.values())
        if total <= 0 or seen <= 0:
            return []
        out: list[Shape] = []
        for shape, w in sorted(weights.items()):
            out.extend([shape] * round(WEIGHT * seen * round(STEPS * w / total) / STEPS))
        return out


def _gpus(shape: Shape) -> float:
    return shape.gpus * shape.milli_gpu / MILLI
