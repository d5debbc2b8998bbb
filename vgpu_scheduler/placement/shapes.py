"""Pods as resource shapes in milli-GPU terms, the common language of the placement
policies that reason about the workload as a whole (fragmentation, stranding, packing).

The GPU-sharing literature and the Alibaba trace speak of milli-GPU: 1000 = one whole GPU.
A container's compute share in percent is ``percent × 10`` milli-GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.annotations import GpuSelector

MILLI = 1000


def milli_of_percent(percent: int) -> int:
    """A share given in percent of a GPU, in milli-GPU."""
    return percent * MILLI // 100


@dataclass(frozen=True, order=True)
class Shape:
    """A task's resource shape: CPU, GPU share per GPU, GPU count, allowed GPU models."""

    milli_cpu: int
    milli_gpu: int  # per GPU; 1000 = a whole GPU
    gpus: int
    models: tuple[str, ...] = ()  # use-gputype: empty, any model
    memory_mib: int = 0  # host memory; the stranding measure weighs it, FGD ignores it
    excluded: tuple[str, ...] = ()  # nouse-gputype

    @property
    def total_milli_gpu(self) -> int:
        return self.milli_gpu * self.gpus

    def allows(self, model: str) -> bool:
        """Whether the task may use a GPU of ``model``, by the rule the filter applies."""
        if not self.models and not self.excluded:
            return True
        return GpuSelector(use_types=self.models, nouse_types=self.excluded).type_allowed(model)


def take_gpus(gpu_left: Sequence[int], milli_gpu: int, gpus: int) -> tuple[int, ...] | None:
    """GPU indices a non-shared request takes: the fullest GPUs that still fit, then by index.

    For whole-GPU requests that is the first idle GPUs by index, as the FGD artifact
    allocates. None when the request does not fit.
    """
    order = sorted(range(len(gpu_left)), key=lambda i: gpu_left[i])
    taken = [i for i in order if gpu_left[i] >= milli_gpu][:gpus]
    return tuple(sorted(taken)) if len(taken) == gpus else None
