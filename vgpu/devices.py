"""The device model and the fit arithmetic every placement decision rests on.

A physical GPU is a :class:`Device`; what is already placed on it is a :class:`Usage`.
:func:`fit` answers whether one vGPU slice fits, and why not; it is the single place that
enforces the capacity invariants (memory × scaling, cores, split slots, exclusivity).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, TypeVar, cast

from vgpu.annotations import GpuSelector
from vgpu.errors import RequestError
from vgpu.isolation_modes import UNKNOWN
from vgpu.requests import ContainerRequest

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FULL_CORES = 100

#: MiB as one number, or as a numpy column of numbers (one per node or GPU): the helpers
#: below compute the same either way, so the vectorised index and the exact fit agree.
MiB = TypeVar("MiB", int, "npt.NDArray[np.int64]")


@dataclass(frozen=True)
class Device:
    """One physical GPU as its node agent reports it."""

    uuid: str
    index: int
    model: str
    memory_mib: int
    cores: int = FULL_CORES
    split: int = 10
    numa: int = 0
    healthy: bool = True
    #: The isolation mode the GPU runs in now (:mod:`vgpu.isolation_modes`), as its agent reports.
    isolation: str = UNKNOWN
    #: Taking no new slices (the node's ``hami.io/device-cordon``); its pods keep theirs.
    cordoned: bool = False


@dataclass(frozen=True)
class Usage:
    """What is allocated on one GPU: memory (MiB), compute percent and task count."""

    memory_mib: int = 0
    cores: int = 0
    tasks: int = 0

    def add(self, memory_mib: int, cores: int) -> Usage:
        return Usage(self.memory_mib + memory_mib, self.cores + cores, self.tasks + 1)

    def remove(self, memory_mib: int, cores: int) -> Usage:
        return Usage(
            max(0, self.memory_mib - memory_mib), max(0, self.cores - cores), max(0, self.tasks - 1)
        )

    def plus(self, other: Usage) -> Usage:
        return Usage(self.memory_mib + other.memory_mib, self.cores + other.cores,
                     self.tasks + other.tasks)

    def minus(self, other: Usage) -> Usage:
        return Usage(max(0, self.memory_mib - other.memory_mib),
                     max(0, self.cores - other.cores), max(0, self.tasks - other.tasks))


EMPTY = Usage()


class FitReason(enum.Enum):
    """Why a slice does not fit a GPU. The value is the phrase in scheduling summaries."""

    UNHEALTHY = "GPU unhealthy"
    TYPE_EXCLUDED = "GPU type excluded"
    UUID_EXCLUDED = "GPU UUID excluded"
    NO_SLOTS = "no free GPU slots"
    MEMORY = "insufficient GPU memory"
    CORES = "insufficient GPU cores"
    EXCLUSIVE = "GPU busy, exclusive use requested"
    FULLY_CLAIMED = "GPU compute fully claimed"
    MODE_EXCLUDED = "GPU isolation mode excluded"
    BUSY = "GPU in use, only idle GPUs requested"
    CORDONED = "GPU cordoned"


@functools.lru_cache(maxsize=64)
def _ratio(scaling: float) -> tuple[int, int]:
    # The decimal the operator wrote, exactly: repr() is the shortest text that reads back
    # as this float. Multiplying by the float itself lands just under whole numbers
    # (15360 × 2.05 = 31487.999...), losing a MiB to the floor.
    exact = Fraction(repr(scaling))
    return exact.numerator, exact.denominator


def memory_capacity(device: Device, scaling: float) -> int:
    """Schedulable memory of a GPU: physical size × the configured memory scaling."""
    numerator, denominator = _ratio(scaling)
    return device.memory_mib * numerator // denominator


def share_of(capacity_mib: MiB, percent: int) -> MiB:
    """``percent`` of a schedulable memory size, in MiB."""
    # Floor, so that 100 % is exactly the capacity and two 50 % slices always fit together.
    return capacity_mib * percent // 100


def slice_mib(request: ContainerRequest, capacity_mib: MiB) -> MiB:
    """MiB one vGPU of ``request`` takes on a GPU of ``capacity_mib`` schedulable memory:
    its absolute size, or its percentage of that capacity."""
    if request.memory_mib is not None:
        # An int is a valid value of either MiB type: it broadcasts over a column.
        return cast("MiB", request.memory_mib)  # type: ignore[redundant-cast]
    return share_of(capacity_mib,
                    request.memory_percent if request.memory_percent is not None else 100)


def resolve_memory(request: ContainerRequest, device: Device, scaling: float) -> int:
    """MiB one vGPU of ``request`` takes on ``device``; percentages are of the scaled size."""
    return slice_mib(request, memory_capacity(device, scaling))


def percent_of(percent: int, device: Device, scaling: float) -> int:
    return share_of(memory_capacity(device, scaling), percent)


def largest_percent(free_mib: int, capacity_mib: int) -> int | None:
    """The largest percentage ``p`` with ``percent_of(p) <= free_mib`` (at most 100), so an
    index of "largest fitting percentage" never rejects a fit; None when nothing fits."""
    if capacity_mib <= 0 or free_mib < 0:
        return None
    return min(100, ((free_mib + 1) * 100 - 1) // capacity_mib)


def takes_tasks(device: Device, usage: Usage) -> bool:
    """Whether the GPU can take another task at all: healthy, not cordoned, a free split
    slot, and compute not fully claimed (the usage-only part of :func:`fit`)."""
    return device.healthy and not device.cordoned and usage.tasks < device.split and not (
        usage.tasks > 0 and usage.cores >= device.cores)


def selectable(device: Device, selector: GpuSelector) -> FitReason | None:
    """Whether the pod's annotations allow this GPU at all (independent of usage)."""
    if not selector.type_allowed(device.model):
        return FitReason.TYPE_EXCLUDED
    if not selector.uuid_allowed(device.uuid):
        return FitReason.UUID_EXCLUDED
    if not selector.mode_allowed(device.isolation):
        return FitReason.MODE_EXCLUDED
    return None


def fit(device: Device, usage: Usage, memory_mib: int, cores: int,
        scaling: float) -> FitReason | None:
    """Whether a slice of ``memory_mib`` and ``cores`` fits on ``device``; None when it does."""
    if not device.healthy:
        return FitReason.UNHEALTHY
    if device.cordoned:
        return FitReason.CORDONED
    if usage.tasks >= device.split:
        return FitReason.NO_SLOTS
    if usage.memory_mib + memory_mib > memory_capacity(device, scaling):
        return FitReason.MEMORY
    if cores >= device.cores and usage.tasks > 0:
        return FitReason.EXCLUSIVE
    # A GPU whose compute is fully handed out (one exclusive task, or shares summing to
    # 100) takes no further task, not even one asking for 0 cores: it would get no time.
    if usage.tasks > 0 and usage.cores >= device.cores:
        return FitReason.FULLY_CLAIMED
    if usage.cores + cores > device.cores:
        return FitReason.CORES
    return None


def fit_held(device: Device, usage: Usage, held: Usage, scaling: float) -> FitReason | None:
    """:func:`fit` for what one pod holds on the GPU (its :func:`vgpu.init_reuse.footprint`,
    maybe several tasks): whether it fits beside ``usage``."""
    if held.tasks <= 1:
        return fit(device, usage, held.memory_mib, held.cores, scaling)
    if not device.healthy:
        return FitReason.UNHEALTHY
    if device.cordoned:
        return FitReason.CORDONED
    if usage.tasks + held.tasks > device.split:
        return FitReason.NO_SLOTS
    if usage.memory_mib + held.memory_mib > memory_capacity(device, scaling):
        return FitReason.MEMORY
    if usage.tasks > 0 and usage.cores >= device.cores:
        return FitReason.FULLY_CLAIMED
    if usage.cores + held.cores > device.cores:
        return FitReason.CORES
    return None


def fit_request(device: Device, usage: Usage, request: ContainerRequest, selector: GpuSelector,
                scaling: float) -> FitReason | None:
    """:func:`fit` for one vGPU of a parsed container request, annotations included."""
    reason = selectable(device, selector)
    if reason is not None:
        return reason
    if selector.idle_only and usage.tasks > 0 and device.healthy and not device.cordoned:
        return FitReason.BUSY
    return fit(device, usage, resolve_memory(request, device, scaling), request.cores, scaling)


def check_possible(request: ContainerRequest, devices: Iterable[Device], *,
                   max_gpus_per_node: int, scaling: float, gpu_name: str, mem_name: str) -> None:
    """Reject a container no node of the cluster could ever hold, with a message to act on.

    Only called when the cluster's inventory is known; with no inventory every request is
    possible as far as anyone can tell.
    """
    if max_gpus_per_node and request.count > max_gpus_per_node:
        raise RequestError(
            f"container {request.name!r}: asks for {request.count} GPUs ({gpu_name}) but no "
            f"node has more than {max_gpus_per_node}"
        )
    if request.memory_mib is not None:
        largest = max((memory_capacity(d, scaling) for d in devices), default=0)
        if largest and request.memory_mib > largest:
            raise RequestError(
                f"container {request.name!r}: asks for {request.memory_mib} MiB per GPU "
                f"({mem_name}) but the largest GPU in the cluster offers {largest} MiB"
            )
