"""HAMi's namespace quota on GPU memory and compute, read from Kubernetes ResourceQuotas
(docs/quotas.md#hamis-quotas): pure arithmetic, for the scheduler's ``HamiQuota`` filter and
``vgpu inspect``.

HAMi caps a namespace with ``spec.hard`` entries Kubernetes itself does not count,
``limits.nvidia.com/gpumem`` (MiB, in units of ``memoryFactor``) and
``limits.nvidia.com/gpucores`` (percent of a GPU), and its scheduler refuses a placement
that would take the namespace's GPU pods past them. The used amounts are what the
namespace's pods hold on their GPUs: each pod's slices, init containers counted by the
largest (:func:`vgpu.init_reuse.footprint`), whatever node they are on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu import meta
from vgpu.codecs import Assignment
from vgpu.config import Config
from vgpu.errors import QuantityError
from vgpu.init_reuse import footprint
from vgpu.quantity import parse_whole

PREFIX = "limits."


@dataclass(frozen=True)
class HamiLimits:
    """A namespace's caps (None: not capped), MiB after ``memoryFactor``, and the
    quotas that set them (for messages)."""

    memory_mib: int | None = None
    cores: int | None = None
    memory_from: str = ""
    cores_from: str = ""

    @property
    def capped(self) -> bool:
        return self.memory_mib is not None or self.cores is not None


NONE = HamiLimits()


def _hard(quota: Mapping[str, Any], name: str) -> int | None:
    hard = meta.mapping(meta.mapping(quota.get("spec")).get("hard"))
    raw = hard.get(PREFIX + name)
    if raw is None:
        return None
    try:
        return parse_whole(raw)
    except QuantityError:
        return None  # HAMi skips a value that is not an integer


def limits_of(quotas: Iterable[Mapping[str, Any]], namespace: str,
              config: Config) -> HamiLimits:
    """The namespace's caps over all its quotas: the strictest of each (HAMi keeps the
    quota it saw last)."""
    rn = config.resource_names
    memory: tuple[int, str] | None = None
    cores: tuple[int, str] | None = None
    for quota in quotas:
        if meta.namespace(quota, "default") != namespace:
            continue
        name = meta.name(quota)
        mib = _hard(quota, rn.gpumem)
        if mib is not None and (memory is None or mib * config.memory_factor < memory[0]):
            memory = (mib * config.memory_factor, name)
        pct = _hard(quota, rn.gpucores)
        if pct is not None and (cores is None or pct < cores[0]):
            cores = (pct, name)
    if memory is None and cores is None:
        return NONE
    return HamiLimits(memory[0] if memory else None, cores[0] if cores else None,
                      memory[1] if memory else "", cores[1] if cores else "")


def held(assignment: Assignment) -> tuple[int, int]:
    """MiB and cores a pod holds over its GPUs, init containers counted by the largest."""
    usage = footprint(assignment.containers, assignment.before_apps).values()
    return sum(u.memory_mib for u in usage), sum(u.cores for u in usage)


def over(limits: HamiLimits, used: tuple[int, int], asked: tuple[int, int],
         config: Config, namespace: str) -> str | None:
    """Why ``asked`` beside ``used`` exceeds the caps (None: it fits), in words."""
    rn = config.resource_names
    if limits.memory_mib is not None and used[0] + asked[0] > limits.memory_mib:
        return (f"GPU memory quota exceeded: {asked[0]} MiB asked, {used[0]} of "
                f"{limits.memory_mib} MiB in use in namespace {namespace} (ResourceQuota "
                f"{limits.memory_from}, {PREFIX}{rn.gpumem})")
    if limits.cores is not None and used[1] + asked[1] > limits.cores:
        return (f"GPU cores quota exceeded: {asked[1]} % asked, {used[1]} of {limits.cores} "
                f"% in use in namespace {namespace} (ResourceQuota {limits.cores_from}, "
                f"{PREFIX}{rn.gpucores})")
    return None
