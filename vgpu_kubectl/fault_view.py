"""Fault domains as ``vgpu why`` and ``vgpu inspect`` show them (:mod:`vgpu.fault_domains`,
docs/isolation.md#fault-domains).

The same reading as the scheduler's ``FaultDomain`` plugin: a GPU is one fault domain when
the mode its agent reports, or the mode its node is configured for (its
``vgpu.io/isolation`` label, else the cluster's ``isolation.mode``), shares faults; a placed
pod trusts what its assignment recorded at its placement, else its namespace's default;
the pod being asked about trusts what its annotation says now.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from vgpu import fault_domains, isolation_modes, meta
from vgpu.annotations import NODE_GPUS
from vgpu.codecs import Assignment, decode_inventory
from vgpu.devices import Device
from vgpu.errors import CodecError
from vgpu.fault_domains import Defaults, Tenant
from vgpu.pods import node_name, pod_key

Obj = Mapping[str, Any]
#: Per (node, GPU uuid), the pods on that GPU as fault domains see them.
Occupants = Mapping[tuple[str, str], Sequence[Tenant]]


def configured_mode(node: Obj, default: str) -> str:
    """The mode a node is configured for: its label when that names a mode, else
    ``default``; ``auto`` as its agent resolved it (its inventory's ``isolation``)."""
    label = meta.labels_of(node).get(isolation_modes.NODE_LABEL)
    if isolation_modes.resolve_mode(default, label).mode != isolation_modes.AUTO:
        return isolation_modes.resolve_mode(default, label).mode
    try:
        inventory = decode_inventory(meta.annotations_of(node).get(NODE_GPUS))
    except CodecError:
        return isolation_modes.AUTO
    target = inventory.isolation.configured if inventory.isolation is not None else None
    return isolation_modes.configured(default, label, target)


def configured_modes(nodes: Iterable[Obj], default: str) -> dict[str, str]:
    """Per node name, the mode it is configured for."""
    return {meta.name(n): configured_mode(n, default) for n in nodes}


def tenant(pod: Obj, assignment: Assignment, defaults: Defaults) -> Tenant:
    """A placed pod as it trusts: its scope as recorded at its placement."""
    namespace = meta.namespace(pod, "default")
    return Tenant(namespace, fault_domains.held(assignment.fault_domain, namespace, defaults),
                  pod_key(pod))


def add(occupants: dict[tuple[str, str], list[Tenant]], pod: Obj, assignment: Assignment,
        defaults: Defaults) -> None:
    """Record ``pod`` on each GPU its assignment names (on its node)."""
    node = node_name(pod) or assignment.node
    who = tenant(pod, assignment, defaults)
    for uuid in assignment.gpu_ids:
        occupants.setdefault((node, uuid), []).append(who)


def shares_faults(device: Device, configured: str | None) -> bool:
    return fault_domains.gpu_shares_faults(device.isolation, configured or device.isolation)


def takes(device: Device, configured: str | None, on_gpu: Sequence[Tenant]) -> str | None:
    """Who the GPU's fault domain still takes (``any``, ``<ns> only``, ``""`` when empty);
    None when the GPU keeps each pod's faults its own."""
    if not shares_faults(device, configured):
        return None
    return fault_domains.guard(on_gpu)


def barred(me: Tenant, node: str, devices: Sequence[Device], configured: str | None,
           occupants: Occupants) -> Collection[str]:
    """The GPUs of ``node`` that ``me`` may not join: each shares faults with a pod that
    does not trust it, or that it does not trust."""
    return {d.uuid for d in devices if shares_faults(d, configured)
            and fault_domains.blocker(me, occupants.get((node, d.uuid), ())) is not None}


def describe(scope: str, namespace: str, how: str) -> str:
    """One line for ``vgpu why``: the pod's scope, where it comes from, what it means."""
    if scope == fault_domains.ANY:
        meaning = "it may share a GPU's faults (MPS, or no isolation) with any pod that trusts it"
    elif scope == fault_domains.NAMESPACE:
        meaning = (f"it shares a GPU in mps, mps-hami-core or none only with pods of "
                   f"namespace {namespace} that trust it")
    else:
        meaning = "a scope this vgpu does not know: it shares no fault domain"
    return f"{scope} ({how}): {meaning}"


def _how(stated: bool, namespace: str, source: str) -> str:
    return source if stated else f"the default for namespace {namespace}"


def for_pending(pod: Obj, placed: Iterable[tuple[Obj, Assignment]],
                inventories: Mapping[str, Sequence[Device]], modes: Mapping[str, str],
                defaults: Defaults) -> tuple[str | None, dict[str, Collection[str]]]:
    """For a pod no node took: its fault-domain line and, per node, the GPUs it may not
    join. No line for a pod that trusts anyone where no GPU bars it. Raises
    :class:`~vgpu.errors.RequestError` for an unreadable annotation."""
    namespace = meta.namespace(pod, "default")
    scope, stated = fault_domains.effective(meta.annotations_of(pod), namespace, defaults)
    occupants: dict[tuple[str, str], list[Tenant]] = {}
    for other, assignment in placed:
        add(occupants, other, assignment, defaults)
    me = Tenant(namespace, scope, pod_key(pod))
    closed = {node: gpus for node, devices in inventories.items()
              if (gpus := barred(me, node, devices, modes.get(node), occupants))}
    if scope == fault_domains.ANY and not closed:
        return None, {}
    line = describe(scope, namespace, _how(stated, namespace, f"its {fault_domains.ANNOTATION}"))
    if closed:
        count = sum(len(g) for g in closed.values())
        line += (f"; {count} GPU(s) on {len(closed)} node(s) hold pods it may not share "
                 f"faults with")
    return line, closed


def for_placed(pod: Obj, assignment: Assignment, defaults: Defaults) -> str | None:
    """For a placed pod: its fault-domain line as recorded at its placement; none when it
    trusts anyone."""
    who = tenant(pod, assignment, defaults)
    if who.scope == fault_domains.ANY:
        return None
    return describe(who.scope, who.namespace, _how(assignment.fault_domain is not None,
                                                   who.namespace, "recorded at its placement"))
