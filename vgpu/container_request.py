"""One container's GPU request, read with HAMi's rules (docs/contracts.md#request-defaults).

HAMi is the reference for the five resources: a value HAMi accepts is accepted here with
HAMi's meaning, and where vgpu reads it otherwise, or HAMi ignores it, a note says so (the
webhook returns the notes as admission warnings). What HAMi does, and so what this does:

- a count of 0, or no count with only ``priority`` given, is no GPU; with no count and
  memory or cores given, ``defaultGpuNum`` vGPUs (none when it is 0);
- ``gpumem`` is multiplied by ``memoryFactor``; ``gpumem: 0`` and
  ``gpumem-percentage: 0`` mean "not given", so the memory default applies
  (``defaultMem`` MiB, else the whole GPU); with both given, ``gpumem`` wins;
- a percentage outside 0-100 is refused, as HAMi's webhook refuses it;
- ``gpucores`` above 100 is 100; a request for a whole GPU's memory that gives no cores is
  exclusive (100 cores), as HAMi's webhook writes it: a count with no memory at all, or
  ``gpumem-percentage: 100``;
- negative quantities are refused (Kubernetes' validation refuses them anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.config import Config, ResourceNames
from vgpu.errors import QuantityError, RequestError
from vgpu.quantity import parse_whole

#: The in-container limiter understands these two: 0 is high priority, 1 is low.
PRIORITIES = (0, 1)
EXCLUSIVE_CORES = 100


@dataclass(frozen=True)
class ContainerRequest:
    """What one container asked for, per vGPU, after defaulting.

    Exactly one of ``memory_mib`` and ``memory_percent`` is set: an absolute size, or a
    share of whichever GPU the scheduler picks (100 = the whole GPU).
    """

    name: str
    count: int
    memory_mib: int | None
    memory_percent: int | None
    cores: int
    priority: int | None = None
    init: bool = False
    #: True when the container itself named no count and ``defaultGpuNum`` was applied.
    count_defaulted: bool = False
    #: An init container that keeps running beside the app containers
    #: (``restartPolicy: Always``): its slices add to theirs.
    sidecar: bool = False
    #: True when the container gave no cores and asks for a whole GPU's memory, so it
    #: is exclusive by HAMi's rule (the webhook writes the 100 cores on the pod).
    cores_defaulted: bool = False

    @property
    def exclusive(self) -> bool:
        """100 cores means the whole GPU: it needs an idle one and takes it alone."""
        return self.cores >= EXCLUSIVE_CORES

    @property
    def runs_before_apps(self) -> bool:
        """An init container that ends before the app containers start: the kubelet hands
        its devices on to them, and it is counted by the largest, not added."""
        return self.init and not self.sidecar


def resources(container: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any],
                                                                 Mapping[str, Any]]:
    """A container's ``limits`` and ``requests``, checked to be mappings."""
    section = container.get("resources") or {}
    if not isinstance(section, Mapping):
        raise RequestError(f"{where}: resources must be a mapping")
    limits = section.get("limits") or {}
    requests = section.get("requests") or {}
    if not isinstance(limits, Mapping) or not isinstance(requests, Mapping):
        raise RequestError(f"{where}: resources.limits and resources.requests must be mappings")
    return limits, requests


def _value(sources: tuple[Mapping[str, Any], ...], name: str, where: str) -> int | None:
    # Limits win: for extended resources Kubernetes requires requests == limits anyway,
    # and a pod that gives only limits gets requests copied from them. The third source
    # is what the webhook moved off an init container (vgpu.init_resources).
    for source in sources:
        raw = source.get(name)
        if raw is None:
            continue
        try:
            value = parse_whole(raw)
        except QuantityError as exc:
            raise QuantityError(f"{where}: {name}: {exc}") from None
        if value < 0:
            raise RequestError(f"{where}: {name} is {value}; it must not be negative")
        return value
    return None


@dataclass(frozen=True)
class _Given:
    """The five values as the container gives them (None: not given)."""

    count: int | None
    memory: int | None
    percent: int | None
    cores: int | None
    priority: int | None


def _count(given: _Given, config: Config, where: str, notes: list[str]) -> int:
    """The vGPU count, 0 for no GPU, by HAMi's rules."""
    rn = config.resource_names
    if given.count is not None:
        if given.count == 0:
            notes.append(f"{where}: {rn.gpu}: 0 asks for no GPU; its other GPU resources "
                         f"mean nothing")
        return given.count
    if given.memory is None and given.percent is None and given.cores is None:
        notes.append(f"{where}: {rn.priority} alone asks for no GPU (add {rn.gpu})")
        return 0
    if config.default_gpu_num == 0:
        notes.append(f"{where}: gives no {rn.gpu} and defaultGpuNum is 0: no GPU")
    return config.default_gpu_num


def _memory(given: _Given, config: Config, where: str,
            notes: list[str]) -> tuple[int | None, int | None]:
    """MiB per vGPU (after ``memoryFactor``) or a percentage, before the defaults."""
    rn = config.resource_names
    memory, percent = given.memory, given.percent
    if percent is not None and percent > 100:
        raise RequestError(f"{where}: {rn.gpumem_percentage} is {percent}; it must be an "
                           f"integer between 0 and 100")
    if memory == 0 or percent == 0:
        zero = rn.gpumem if memory == 0 else rn.gpumem_percentage
        notes.append(f"{where}: {zero}: 0 means not given, as in HAMi: the memory default "
                     f"applies")
        memory = memory or None
        percent = percent or None
    if memory is not None and percent is not None:
        notes.append(f"{where}: gives both {rn.gpumem} and {rn.gpumem_percentage}; "
                     f"{rn.gpumem} wins, as in HAMi")
        percent = None
    if memory is not None:
        memory *= config.memory_factor
    return memory, percent


def _cores(given: _Given, config: Config, where: str, notes: list[str]) -> tuple[int, bool]:
    """Cores per vGPU and whether they were defaulted to an exclusive GPU."""
    if given.cores is not None:
        if given.cores > EXCLUSIVE_CORES:
            notes.append(f"{where}: {config.resource_names.gpucores}: {given.cores} is 100, "
                         f"as in HAMi")
            return EXCLUSIVE_CORES, False
        return given.cores, False
    # HAMi's webhook: a whole GPU's memory and no cores is the whole GPU.
    whole = given.percent == 100 if given.percent is not None else given.memory is None
    if whole:
        return EXCLUSIVE_CORES, True
    return config.default_cores, False


def _priority(given: _Given, rn: ResourceNames, where: str, notes: list[str]) -> int | None:
    if given.priority is not None and given.priority not in PRIORITIES:
        notes.append(f"{where}: {rn.priority}: {given.priority} is handed to HAMi-core as 1 "
                     f"(low); it knows 0 and 1")
        return 1
    return given.priority


def parse_values(name: str, sources: tuple[Mapping[str, Any], ...], config: Config, *,
                 init: bool, sidecar: bool, where: str,
                 notes: list[str]) -> ContainerRequest | None:
    """The request of a container that names a vgpu resource; None when it asks for no
    GPU. ``sources``: its limits, its requests, then what the webhook moved off it."""
    rn = config.resource_names
    values = [_value(sources, resource, where) for resource in rn.all()]
    if values == [None] * 5:
        return None
    given = _Given(*values)
    count = _count(given, config, where, notes)
    if count == 0:
        return None
    memory, percent = _memory(given, config, where, notes)
    cores, cores_defaulted = _cores(given, config, where, notes)
    if memory is None and percent is None:
        if config.default_mem > 0:
            memory = config.default_mem
        else:
            percent = 100
    return ContainerRequest(
        name=name,
        count=count,
        memory_mib=memory,
        memory_percent=percent,
        cores=cores,
        priority=_priority(given, rn, where, notes),
        init=init,
        count_defaulted=given.count is None,
        sidecar=sidecar,
        cores_defaulted=cores_defaulted,
    )
