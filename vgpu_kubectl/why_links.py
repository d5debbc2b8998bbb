"""What ``vgpu why`` says about the links between a pod's GPUs.

For a placed pod: per container of several vGPUs, the link between its slowest pair, and
whether that is the fastest the node has for that many GPUs (the scheduler chose by it;
docs/contracts.md#user-annotations, ``vgpu.io/gpu-topology``). For a pending pod that
requires the fastest links: on a node whose GPUs fit but not linked that fast, what is
short. Both from the node's inventory and the assignments, at no extra API call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu.annotations import GPU_TOPOLOGY, TOPOLOGY_REQUIRED, GpuSelector
from vgpu.codecs import Assignment, NodeInventory
from vgpu.devices import EMPTY, Usage, fit_request
from vgpu.requests import ContainerRequest
from vgpu.topology.choice import best_worst, choose
from vgpu.topology.links import LinkMatrix, label, matrix


def _fastest_label(m: LinkMatrix, positions: Sequence[int], count: int) -> str | None:
    """The label of the slowest pair of the fastest ``count`` of ``positions``."""
    pick = choose(positions, count, m, classes=[0] * len(positions))
    slowest = None if pick is None else m.slowest(pick.positions)
    return None if slowest is None else label(slowest)


def placed_lines(assignment: Assignment, inventory: NodeInventory | None) -> tuple[str, ...]:
    """One line per container of several vGPUs: its slowest link against the node's best."""
    multi = {name: g for name, g in assignment.containers.items() if len(g) > 1}
    if not multi or inventory is None:
        return ()
    if inventory.links is None:
        return (f"the links of {assignment.node}'s GPUs are unknown (its node agent "
                f"publishes none): the GPUs were chosen without them",)
    devices = inventory.devices
    m = matrix([d.uuid for d in devices], inventory.links)
    at = {d.uuid: p for p, d in enumerate(devices)}
    healthy = [p for p, d in enumerate(devices) if d.healthy]
    lines = []
    for name, granted in sorted(multi.items()):
        positions = [at[g.uuid] for g in granted if g.uuid in at]
        if len(positions) != len(granted):
            continue  # a GPU the inventory no longer lists: placement speaks of that
        slowest = m.slowest(positions)
        got = label(slowest) if slowest is not None else "?"
        best = _fastest_label(m, healthy, len(positions))
        indexes = ",".join(str(devices[p].index) for p in positions)
        if m.worst(positions) >= (best_worst(healthy, len(positions), m) or 0):
            lines.append(f"{name}: GPUs {indexes} linked by {got}, the fastest "
                         f"{assignment.node} has for {len(positions)} GPUs")
        else:
            lines.append(f"{name}: GPUs {indexes} linked by {got}; {assignment.node}'s "
                         f"fastest for {len(positions)} GPUs is {best}, which was taken or "
                         f"did not fit when it was placed")
    return tuple(lines)


def required_short(request: ContainerRequest, inventory: NodeInventory, *,
                   usages: Mapping[str, Usage], selector: GpuSelector,
                   scaling: float) -> str | None:
    """For a container that requires the fastest links and fits by count: why this node
    cannot give them now; None when it can (or the container needs one GPU)."""
    if request.count < 2:
        return None
    head = f"container {request.name}: requires the fastest links ({GPU_TOPOLOGY}: " \
           f"{TOPOLOGY_REQUIRED})"
    if inventory.links is None:
        return f"{head}, and this node's links are unknown"
    devices = inventory.devices
    m = matrix([d.uuid for d in devices], inventory.links)
    possible = [p for p, d in enumerate(devices)
                if fit_request(d, EMPTY, request, selector, scaling) is None]
    free = [p for p, d in enumerate(devices)
            if fit_request(d, usages.get(d.uuid, EMPTY), request, selector, scaling) is None]
    fastest = best_worst(possible, request.count, m)
    now = best_worst(free, request.count, m)
    if fastest is None or now is None or now >= fastest:
        return None
    return (f"{head}: the node's fastest {request.count} are linked by "
            f"{_fastest_label(m, possible, request.count)}, the fastest free now by "
            f"{_fastest_label(m, free, request.count)}")
