"""GetPreferredAllocation's choice: steer the kubelet to the slots of the assigned GPUs.

The kubelet picks which virtual IDs a container gets; the scheduler already decided which
physical GPUs. Preferring slots on those GPUs keeps the kubelet's view (which slots are
used) in line with the scheduler's (which GPUs are used). The answer is advisory, so it
never fails: without an assignment it still honours ``must_include`` and the size, and
spreads over distinct GPUs as a container's vGPUs must be; when the node's links are
known it picks those GPUs as the scheduler would on idle GPUs
(:func:`vgpu.topology.choice.choose`: the fastest slowest pair, then the idle fast sets
kept whole, then the lowest indexes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vgpu.topology import choice
from vgpu.topology.links import LinkMatrix


@dataclass(frozen=True)
class Links:
    """The node's shared GPUs in index order, the links between them, and the slots each
    GPU has (all of them free: an idle GPU)."""

    uuids: tuple[str, ...]
    matrix: LinkMatrix
    split: int


def _by_links(available: Sequence[str], chosen: list[str], covered: set[str | None], *,
              need: int, gpu_of: Callable[[str], str | None], links: Links) -> None:
    """Add one slot on each of the GPUs that, with those ``covered``, link fastest."""
    free: dict[str, list[str]] = {}
    for device_id in available:
        gpu = gpu_of(device_id)
        if gpu is not None and device_id not in chosen:
            free.setdefault(gpu, []).append(device_id)
    held = [g for g in links.uuids if g in covered]
    others = [g for g in links.uuids if g not in covered and g in free]
    if not others:
        return
    total = len(held) + min(need, len(others))
    at = {u: i for i, u in enumerate(links.uuids)}
    order = [at[g] for g in (*held, *others)]
    idle = {at[g] for g in others if len(free[g]) >= links.split}
    pick = choice.choose(order, total, links.matrix, classes=[0] * len(order), idle=idle,
                         fixed=len(held))
    for position in pick.positions if pick is not None else ():
        gpu = links.uuids[position]
        if gpu not in covered:
            chosen.append(free[gpu][0])
            covered.add(gpu)


def choose(available: Sequence[str], must_include: Sequence[str], size: int,
           wanted_gpus: Sequence[str], gpu_of: Callable[[str], str | None], *,
           links: Links | None = None) -> list[str]:
    """Pick ``size`` IDs from ``available`` (plus ``must_include``), preferring one slot on
    each GPU of ``wanted_gpus``, then slots on the GPUs not yet chosen that ``links`` says
    link fastest, then on any GPU not yet chosen, then any."""
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
    if links is not None and len(chosen) < size:
        _by_links(available, chosen, covered, need=size - len(chosen), gpu_of=gpu_of,
                  links=links)
    take(lambda gpu: gpu is None or gpu not in covered)
    take(lambda gpu: True)
    return chosen
