"""GetPreferredAllocation's choice: steer the kubelet to the slots of the assigned GPUs.

The kubelet picks which virtual IDs a container gets; the scheduler already decided which
physical GPUs. Preferring slots on those GPUs keeps the kubelet's view (which slots are
used) in line with the scheduler's (which GPUs are used). The answer is advisory, so it
never fails: without an assignment it still honours ``must_include`` and the size, and
spreads over distinct GPUs as a container's vGPUs must be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def choose(available: Sequence[str], must_include: Sequence[str], size: int,
           wanted_gpus: Sequence[str], gpu_of: Callable[[str], str | None]) -> list[str]:
    """Pick ``size`` IDs from ``available`` (plus ``must_include``), preferring one slot on
    each GPU of ``wanted_gpus``, then slots on GPUs not yet chosen, then any."""
    chosen: list[str] = []
    for device_id in must_include:
        if device_id not in chosen:
            chosen.append(device_id)
    covered = {gpu_of(d) for d in chosen}

    def take(accept: Callable[[str | None], bool]) -> None:
        for device_id in available:
            if len(chosen) >= size:
                return
            gpu = gpu_of(device_id)
            if device_id not in chosen and accept(gpu):
                chosen.append(device_id)
                covered.add(gpu)

    for gpu in wanted_gpus:
        if len(chosen) >= size:
            break
        if gpu in covered:
            continue
        take_one = next((d for d in available if d not in chosen and gpu_of(d) == gpu), None)
        if take_one is not None:
            chosen.append(take_one)
            covered.add(gpu)
    take(lambda gpu: gpu is None or gpu not in covered)
    take(lambda gpu: True)
    return chosen
