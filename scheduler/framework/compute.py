"""CPU, memory and pods: what a pod needs on a node, and what a node offers.

Requests are counted as kube-scheduler counts them (``AggregateContainerRequests``): the
app containers and the sidecars (init containers with ``restartPolicy: Always``) run
together; a plain init container runs alone, beside the sidecars started before it; the
pod needs the larger of the two, plus its overhead. A container's limit stands in for a
missing request. Malformed quantities raise :class:`vgpu.errors.QuantityError` with the
field's path.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from vgpu.errors import QuantityError
from vgpu.fields import as_list, as_map
from vgpu.pods import containers
from vgpu.quantity import parse_quantity


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


def _container_requests(container: Mapping[str, Any], where: str) -> tuple[int, int]:
    resources = as_map(container.get("resources"), f"{where}.resources")
    requests = as_map(resources.get("requests"), f"{where}.resources.requests")
    limits = as_map(resources.get("limits"), f"{where}.resources.limits")
    cpu = requests.get("cpu", limits.get("cpu"))
    memory = requests.get("memory", limits.get("memory"))
    return (milli(cpu, f"{where} cpu") if cpu is not None else 0,
            whole(memory, f"{where} memory") if memory is not None else 0)


def pod_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(CPU millicores, memory bytes) the pod needs on a node (see the module docstring)."""
    spec = as_map(pod.get("spec"), "pod spec")
    for key in ("containers", "initContainers"):
        as_list(spec.get(key), f"spec.{key}")  # a list, or the error says where
    cpu = memory = 0  # app containers and sidecars, running together
    side_cpu = side_mem = 0  # the sidecars started so far
    init_cpu = init_mem = 0  # the largest need while an init container runs
    for ref in containers(pod):
        where = f"spec.{ref.key}[{ref.position}]"
        c_cpu, c_mem = _container_requests(as_map(ref.container, where), where)
        if not ref.init or ref.sidecar:
            cpu, memory = cpu + c_cpu, memory + c_mem
        if ref.sidecar:
            side_cpu, side_mem = side_cpu + c_cpu, side_mem + c_mem
            c_cpu, c_mem = side_cpu, side_mem
        elif ref.init:
            c_cpu, c_mem = c_cpu + side_cpu, c_mem + side_mem
        if ref.init:
            init_cpu, init_mem = max(init_cpu, c_cpu), max(init_mem, c_mem)
    cpu, memory = max(cpu, init_cpu), max(memory, init_mem)
    overhead = as_map(spec.get("overhead"), "spec.overhead")
    if "cpu" in overhead:
        cpu += milli(overhead["cpu"], "spec.overhead.cpu")
    if "memory" in overhead:
        memory += whole(overhead["memory"], "spec.overhead.memory")
    return cpu, memory


def node_allocatable(node: Mapping[str, Any]) -> tuple[int, int, int]:
    """(CPU millicores, memory bytes, pods) a node offers; capacity when allocatable is
    absent, 0 when both are."""
    status = as_map(node.get("status"), "node status")
    alloc = as_map(status.get("allocatable"), "status.allocatable") or as_map(
        status.get("capacity"), "status.capacity")
    cpu = milli(alloc["cpu"], "status.allocatable.cpu") if "cpu" in alloc else 0
    memory = whole(alloc["memory"], "status.allocatable.memory") if "memory" in alloc else 0
    pods = whole(alloc["pods"], "status.allocatable.pods") if "pods" in alloc else 0
    return cpu, memory, pods
