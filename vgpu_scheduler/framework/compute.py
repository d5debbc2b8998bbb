"""What a pod asks of a node's resources, and what a node offers.

Every resource kube-scheduler's NodeResourcesFit counts: CPU (millicores), memory, and
the others by name: ``ephemeral-storage`` and the scalar resources (kube's
``IsScalarResourceName``: extended resources such as ``example.com/fpga``, ``hugepages-*``,
``kubernetes.io/``-prefixed native ones, ``attachable-volumes-*``). Names kube ignores
(unknown ones without a ``/``) are ignored here too, and a caller may leave out more
(the names vgpu owns: :meth:`vgpu.config.Config.owns_resource`).

Requests are counted as kube-scheduler counts them (``AggregateContainerRequests``): the
app containers and the sidecars (init containers with ``restartPolicy: Always``) run
together; a plain init container runs alone, beside the sidecars started before it; the
pod needs, per resource, the larger of the two, plus its overhead. A container's limit
stands in for a missing request (the API server's defaulting). Quantities are rounded up
to whole units, as ``Quantity.Value()`` and ``MilliValue()`` round. Malformed quantities
raise :class:`vgpu.errors.QuantityError` with the field's path.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from vgpu.errors import QuantityError
from vgpu.labels import valid_key
from vgpu.pods import containers
from vgpu.quantity import parse_quantity
from vgpu.request_fields import as_list, as_map

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
#: kube's ``ResourceDefaultNamespacePrefix``: a name containing it is a native resource.
_NATIVE = "kubernetes.io/"
#: kube's ``DefaultResourceRequestsPrefix`` (quota names), never a resource of its own.
_REQUESTS = "requests."

NONE: Mapping[str, int] = MappingProxyType({})


def is_extended(name: str) -> bool:
    """kube's ``IsExtendedResourceName``: a qualified name with a domain that is not
    ``kubernetes.io`` (``example.com/fpga``, ``nvidia.com/gpu``)."""
    if "/" not in name or _NATIVE in name or name.startswith(_REQUESTS):
        return False
    return valid_key(_REQUESTS + name)


@functools.lru_cache(maxsize=1024)
def is_counted(name: str) -> bool:
    """Whether NodeResourcesFit counts a resource besides CPU, memory and pods: ephemeral
    storage and kube's scalar resources (``IsScalarResourceName``)."""
    return (name == EPHEMERAL_STORAGE or is_extended(name) or name.startswith("hugepages-")
            or _NATIVE in name or name.startswith("attachable-volumes-"))


@dataclass(frozen=True, slots=True)
class Requests:
    """What a pod takes on a node."""

    cpu: int = 0
    memory: int = 0
    #: Every other counted resource it asks for, by name, in whole units; zeros left out.
    other: Mapping[str, int] = field(default_factory=lambda: NONE)


@dataclass(frozen=True, slots=True)
class Allocatable:
    """What a node offers its pods."""

    cpu: int = 0
    memory: int = 0
    pods: int = 0
    #: Every other counted resource the node has, by name (zeros kept: a node that says
    #: it has none of a resource has none).
    other: Mapping[str, int] = field(default_factory=lambda: NONE)


# The same few spellings ("500m", "4", "16Gi") recur on every pod, and the full grammar
# (regex, Decimal, Fraction) was a tenth of a cold start at 50,000 pods: parsed values are
# kept by spelling. Errors are not kept, and carry the field's path.
@functools.lru_cache(maxsize=4096, typed=True)
def _scaled(raw: str | int | float, scale: int) -> int:
    return math.ceil(parse_quantity(raw) * scale)


def _amount(raw: Any, where: str, scale: int) -> int:
    try:
        if type(raw) in (str, int, float):
            return _scaled(raw, scale)
        return math.ceil(parse_quantity(raw) * scale)
    except QuantityError as exc:
        raise QuantityError(f"{where}: {exc}") from None


def milli(raw: Any, where: str) -> int:
    """CPU quantity → millicores, rounded up as the API server does."""
    return _amount(raw, where, 1000)


def whole(raw: Any, where: str) -> int:
    """Memory (bytes) or count quantity, rounded up."""
    return _amount(raw, where, 1)


def amount(name: str, raw: Any, where: str) -> int:
    """A quantity of resource ``name`` in the unit kube-scheduler counts it in."""
    return milli(raw, where) if name == CPU else whole(raw, where)


Skip = Callable[[str], bool]


def _never(name: str) -> bool:
    return False


def _wanted(name: str, skip: Skip) -> bool:
    return name in _CPU_MEMORY or (is_counted(name) and not skip(name))


_CPU_MEMORY = frozenset({CPU, MEMORY})


def _container_requests(container: Mapping[str, Any], where: str, skip: Skip) -> dict[str, int]:
    resources = as_map(container.get("resources"), f"{where}.resources")
    requests = as_map(resources.get("requests"), f"{where}.resources.requests")
    limits = as_map(resources.get("limits"), f"{where}.resources.limits")
    out: dict[str, int] = {}
    for key, raw in requests.items():
        if _wanted(key, skip):
            out[key] = amount(key, raw, f"{where} {key}")
    for key, raw in limits.items():  # a limit stands in for a missing request
        if key not in requests and _wanted(key, skip):
            out[key] = amount(key, raw, f"{where} {key}")
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _at_least(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        if value > into.get(name, 0):
            into[name] = value


def _requests(total: Mapping[str, int]) -> Requests:
    if len(total) <= 2 and all(k in _CPU_MEMORY for k in total):
        return Requests(total.get(CPU, 0), total.get(MEMORY, 0))
    other = {k: v for k, v in total.items() if k not in _CPU_MEMORY and v}
    return Requests(total.get(CPU, 0), total.get(MEMORY, 0),
                    MappingProxyType(other) if other else NONE)


def pod_requests(pod: Mapping[str, Any], skip: Skip = _never) -> Requests:
    """What the pod needs on a node (see the module docstring); resources ``skip``
    accepts are left out."""
    spec = as_map(pod.get("spec"), "pod spec")
    apps = as_list(spec.get("containers"), "spec.containers")
    if not spec.get("initContainers") and not spec.get("overhead") and len(apps) == 1:
        # Most pods: one container, nothing else to add up.
        return _requests(_container_requests(as_map(apps[0], "spec.containers[0]"),
                                             "spec.containers[0]", skip))
    as_list(spec.get("initContainers"), "spec.initContainers")  # a list, or the error says where
    running: dict[str, int] = {}  # app containers and sidecars, running together
    sidecars: dict[str, int] = {}  # the sidecars started so far
    init: dict[str, int] = {}  # the largest need while an init container runs
    for ref in containers(pod):
        where = f"spec.{ref.key}[{ref.position}]"
        mine = _container_requests(as_map(ref.container, where), where, skip)
        if not ref.init or ref.sidecar:
            _add(running, mine)
        if ref.sidecar:
            _add(sidecars, mine)
            _at_least(init, sidecars)
        elif ref.init:
            alone = dict(sidecars)
            _add(alone, mine)
            _at_least(init, alone)
    _at_least(running, init)
    overhead = as_map(spec.get("overhead"), "spec.overhead")
    _add(running, {str(k): amount(str(k), raw, f"spec.overhead.{k}")
                   for k, raw in overhead.items() if _wanted(str(k), skip)})
    return _requests(running)


def node_allocatable(node: Mapping[str, Any]) -> Allocatable:
    """What a node offers: ``status.allocatable``, or its capacity when allocatable is
    absent; nothing when both are."""
    status = as_map(node.get("status"), "node status")
    alloc = as_map(status.get("allocatable"), "status.allocatable") or as_map(
        status.get("capacity"), "status.capacity")
    values = {str(k): amount(str(k), raw, f"status.allocatable.{k}")
              for k, raw in alloc.items() if k in (CPU, MEMORY, PODS) or is_counted(str(k))}
    other = {k: v for k, v in values.items() if k not in (CPU, MEMORY, PODS)}
    return Allocatable(values.get(CPU, 0), values.get(MEMORY, 0), values.get(PODS, 0),
                       MappingProxyType(other) if other else NONE)


def added(base: Mapping[str, int], changes: Iterable[tuple[Mapping[str, int], int]]
          ) -> Mapping[str, int]:
    """``base`` with each (resources, sign) added, entries that reach 0 dropped; ``base``
    itself when nothing changes it (the common case: pods that ask for CPU and memory
    only)."""
    out: dict[str, int] | None = None
    for resources, sign in changes:
        if not resources:
            continue
        if out is None:
            out = dict(base)
        for name, value in resources.items():
            total = out.get(name, 0) + sign * value
            if total:
                out[name] = total
            else:
                out.pop(name, None)
    if out is None:
        return base
    return MappingProxyType(out) if out else NONE
