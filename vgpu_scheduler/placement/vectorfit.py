""":func:`vgpu.devices.fit` for every GPU of many nodes at once, for failure diagnoses.

When no node fits a pod, the scheduler owes the user a reason per node. Asking ``fit``
about each GPU of 1,000+ nodes costs milliseconds in Python; this module answers the same
question with a few numpy operations over per-GPU snapshot columns. It only *explains*
failures: feasibility is always decided by the exact filter. ``tests/scheduler`` checks
that both give the same reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu.devices import FitReason, share_of

#: Reason codes, in the order ``fit`` checks them; FIT means the slice fits.
FIT = 0
ORDER: tuple[FitReason, ...] = (
    FitReason.TYPE_EXCLUDED,
    FitReason.UNHEALTHY,
    FitReason.CORDONED,
    FitReason.NO_SLOTS,
    FitReason.MEMORY,
    FitReason.EXCLUSIVE,
    FitReason.FULLY_CLAIMED,
    FitReason.CORES,
)
ABSENT = len(ORDER) + 1

Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class GpuColumns:
    """Per-GPU state, each (nodes × slots); absent slots have ``present`` False."""

    present: npt.NDArray[np.bool_]
    healthy: npt.NDArray[np.bool_]
    tasks: Array
    split: Array
    memory_used: Array
    capacity: Array
    cores_used: Array
    cores: Array
    model_bits: Array
    cordoned: npt.NDArray[np.bool_]


def classify(gpus: GpuColumns, *, cores: int, memory_mib: int | None,
             memory_percent: int | None, allowed_models: int | None) -> Array:
    """The code (index into ``ORDER`` plus one, FIT or ABSENT) of every GPU slot."""
    if memory_mib is not None:
        need = np.full(gpus.capacity.shape, memory_mib, dtype=np.int64)
    else:
        need = share_of(gpus.capacity, memory_percent if memory_percent is not None else 100)
    busy = gpus.tasks > 0
    conditions = [
        ~gpus.present,
        (gpus.model_bits & allowed_models) == 0 if allowed_models is not None
        else np.zeros(gpus.present.shape, dtype=np.bool_),
        ~gpus.healthy,
        gpus.cordoned,
        gpus.tasks >= gpus.split,
        gpus.memory_used + need > gpus.capacity,
        (cores >= gpus.cores) & busy,
        busy & (gpus.cores_used >= gpus.cores),
        gpus.cores_used + cores > gpus.cores,
    ]
    choices = [ABSENT, *range(1, len(ORDER) + 1)]
    codes: Array = np.select(conditions, choices, default=FIT).astype(np.int64)
    return codes


def fits_idle(gpus: GpuColumns, *, cores: int, memory_mib: int | None,
              memory_percent: int | None, allowed_models: int | None) -> npt.NDArray[np.bool_]:
    """Per GPU slot, whether one vGPU would fit with nothing else on the GPU (what
    :func:`classify` says for zero usage: only the GPU's own facts count)."""
    if memory_mib is not None:
        need: Array = np.full(gpus.capacity.shape, memory_mib, dtype=np.int64)
    else:
        need = share_of(gpus.capacity, memory_percent if memory_percent is not None else 100)
    ok: npt.NDArray[np.bool_] = (gpus.present & gpus.healthy & ~gpus.cordoned & (gpus.split > 0)
                                 & (need <= gpus.capacity) & (cores <= gpus.cores))
    if allowed_models is not None:
        ok &= (gpus.model_bits & allowed_models) != 0
    return ok


def node_reasons(codes: Array) -> tuple[Array, Array]:
    """(fitting GPUs per node, bitmask of the reasons of its non-fitting present GPUs)."""
    fitting: Array = (codes == FIT).sum(axis=1)
    bits = np.where((codes != FIT) & (codes != ABSENT), np.left_shift(1, codes), 0)
    mask: Array = np.bitwise_or.reduce(bits, axis=1)
    return fitting, mask


def reasons_of(mask: int) -> tuple[str, ...]:
    """The sorted reason phrases of a bitmask (as the exact filter reports them)."""
    return tuple(sorted(r.value for i, r in enumerate(ORDER, start=1) if mask & (1 << i)))
