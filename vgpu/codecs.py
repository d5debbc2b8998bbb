"""Codecs for the annotations that carry state between the components
(docs/contracts.md#conventions; the shapes: #node-inventory, #pod-assignment).

Versioned JSON, keyed by container name. Decoding is strict: a malformed annotation
raises :class:`CodecError` whose message says what is wrong and where, because a
half-understood assignment would hand a container the wrong GPU.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from vgpu import limits, meta, node_isolation, times
from vgpu.annotation_fields import boolean as _bool
from vgpu.annotation_fields import dump as _dump
from vgpu.annotation_fields import integer as _int
from vgpu.annotation_fields import load as _load
from vgpu.annotation_fields import obj as _obj
from vgpu.annotation_fields import string as _str
from vgpu.annotations import ASSIGNMENT, BIND_TIME, NODE_GPUS
from vgpu.devices import Device
from vgpu.errors import CodecError
from vgpu.isolation_modes import UNKNOWN
from vgpu.node_isolation import NodeIsolation
from vgpu.pods import before_apps
from vgpu.topology.codec import decode_links, encode_links
from vgpu.topology.links import GpuLink

VERSION = 1
#: The node inventory is at version 3: the links between its GPUs (version 2 added each
#: device's isolation mode). Version 1 inventories still decode, as mode ``unknown``, and
#: versions 1 and 2 as an unknown topology.
INVENTORY_VERSION = 3
INVENTORY_VERSIONS = (1, 2, 3)


@dataclass(frozen=True)
class NodeInventory:
    devices: tuple[Device, ...]
    #: The version it was read at; encoding always writes the current one.
    version: int = field(default=INVENTORY_VERSION, compare=False)
    #: The links between the GPUs; None when the agent does not know them (an older agent,
    #: a fake-devices file without links), which placement treats as unknown topology.
    links: tuple[GpuLink, ...] | None = None
    #: What the node runs toward as a whole; None from an agent that does not say.
    isolation: NodeIsolation | None = None


@dataclass(frozen=True)
class GrantedDevice:
    """The slice of one physical GPU given to one container."""

    uuid: str
    memory_mib: int
    cores: int


@dataclass(frozen=True)
class Assignment:
    """Where the scheduler put a pod: per container name, the GPU slices it got, and the
    task priority of the containers that asked for one (``nvidia.com/priority``), so the
    node agent can answer Allocate from the assignment alone; and, when the pod stated one
    (``vgpu.io/fault-domain``), whom it may share a fault domain with as it read at the
    placement, which later placements beside it honour whatever the annotation says by
    then (:mod:`vgpu.fault_domains`)."""

    node: str
    containers: Mapping[str, tuple[GrantedDevice, ...]] = field(default_factory=dict)
    version: int = VERSION
    priorities: Mapping[str, int] = field(default_factory=dict)
    fault_domain: str | None = None
    #: The uid its GPU containers run as, when they all state one (:mod:`vgpu.mps_users`):
    #: on an MPS GPU only pods of one uid are placed together.
    run_as_user: int | None = None
    #: The containers that end before the app containers start (plain init containers):
    #: their slices count by the largest, not added (:func:`vgpu.init_reuse.footprint`).
    #: Not written: every reader takes it from the pod's spec, which cannot change.
    before_apps: frozenset[str] = frozenset()

    @functools.cached_property
    def gpu_ids(self) -> frozenset[str]:
        """Every GPU its slices are on; kept, as the Permit gate asks every cycle for each
        pod in flight."""
        return frozenset(s.uuid for slices in self.containers.values() for s in slices)


# --- helpers -----------------------------------------------------------------------------

def _version(obj: Mapping[str, Any], key: str) -> int:
    version = obj.get("version")
    if version != VERSION:
        raise CodecError(f"{key}: unsupported version {json.dumps(version)}; this vgpu reads "
                         f"version {VERSION}")
    return VERSION


# --- node inventory ----------------------------------------------------------------------

def device_to_dict(device: Device) -> dict[str, Any]:
    return {
        "uuid": device.uuid, "index": device.index, "model": device.model,
        "memory_mib": device.memory_mib, "cores": device.cores, "split": device.split,
        "numa": device.numa, "healthy": device.healthy, "isolation": device.isolation,
    }


def encode_inventory(inventory: NodeInventory) -> str:
    out: dict[str, Any] = {"version": INVENTORY_VERSION,
                           "devices": [device_to_dict(d) for d in inventory.devices]}
    if inventory.links is not None:
        out["links"] = encode_links(inventory.links)
    if inventory.isolation is not None:
        out["isolation"] = node_isolation.encode(inventory.isolation)
    return _dump(out)


def decode_inventory(text: Any) -> NodeInventory:
    key = NODE_GPUS
    root = _obj(_load(text, key), key)
    version = root.get("version")
    if version not in INVENTORY_VERSIONS or isinstance(version, bool):
        raise CodecError(f"{key}: unsupported version {json.dumps(version)}; this vgpu reads "
                         f"versions {', '.join(map(str, INVENTORY_VERSIONS))}")
    raw = root.get("devices")
    if not isinstance(raw, list):
        raise CodecError(f"{key}.devices: expected a list")
    devices: list[Device] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"{key}.devices[{i}]"
        obj = _obj(item, where)
        device = Device(
            uuid=_str(obj, "uuid", where),
            index=_int(obj, "index", where, hi=limits.GPU_INDEX),
            model=_str(obj, "model", where),
            memory_mib=_int(obj, "memory_mib", where, lo=1, hi=limits.GPU_MEMORY_MIB),
            cores=_int(obj, "cores", where, lo=1, hi=limits.GPU_CORES),
            split=_int(obj, "split", where, lo=1, hi=limits.GPU_SPLIT),
            numa=_int(obj, "numa", where, lo=-1, hi=limits.NUMA_NODE),
            healthy=_bool(obj, "healthy", where),
            # An open set: a mode this vgpu does not know counts as not enforcing.
            isolation=_str(obj, "isolation", where) if version >= 2 else UNKNOWN,
        )
        if device.uuid in seen:
            raise CodecError(f"{where}.uuid: {device.uuid} appears twice")
        seen.add(device.uuid)
        devices.append(device)
    if len(devices) > limits.GPUS_PER_NODE:
        raise CodecError(f"{key}.devices: {len(devices)} GPUs, more than the "
                         f"{limits.GPUS_PER_NODE} a node may have")
    links = node = None
    if version >= 3 and root.get("links") is not None:
        links = decode_links(root["links"], f"{key}.links", seen)
    if version >= 3 and root.get("isolation") is not None:
        node = node_isolation.decode(root["isolation"], f"{key}.isolation")
    return NodeInventory(devices=tuple(devices), version=version, links=links, isolation=node)


# --- heartbeat ---------------------------------------------------------------------------

def encode_heartbeat(when: dt.datetime) -> str:
    return times.format_micro(when)


def bind_time(annotations: Mapping[str, Any]) -> float | None:
    """Epoch seconds of a pod's ``vgpu.io/bind-time``; None when absent or unreadable (each
    reader then falls back to what suits it: now, never, or the end of the queue)."""
    raw = annotations.get(BIND_TIME)
    if raw is None:
        return None
    try:
        return times.parse(raw, BIND_TIME).timestamp()
    except CodecError:
        return None


# --- pod assignment ----------------------------------------------------------------------

def encode_assignment(assignment: Assignment) -> str:
    out: dict[str, Any] = {
        "version": assignment.version,
        "node": assignment.node,
        "containers": {
            name: [{"uuid": g.uuid, "memory_mib": g.memory_mib, "cores": g.cores}
                   for g in granted]
            for name, granted in assignment.containers.items()
        },
    }
    # Optional, so that assignments without priorities read the same by older agents.
    if assignment.priorities:
        out["priorities"] = dict(assignment.priorities)
    if assignment.fault_domain is not None:  # likewise
        out["fault_domain"] = assignment.fault_domain
    if assignment.run_as_user is not None:
        out["run_as_user"] = assignment.run_as_user
    return _dump(out)


# Shared by every assignment without priorities (nearly all), read-only.
_NO_PRIORITIES: Mapping[str, int] = MappingProxyType({})


def _priorities(root: Mapping[str, Any], containers: Mapping[str, Any],
                key: str) -> Mapping[str, int]:
    raw = root.get("priorities")
    if raw is None:
        return _NO_PRIORITIES
    where = f"{key}.priorities"
    obj = _obj(raw, where)
    for name in obj:
        if name not in containers:
            raise CodecError(f"{where}.{name}: not a container of the assignment")
    return {name: _int(obj, name, where, hi=limits.TASK_PRIORITY) for name in obj}


def decode_assignment(text: Any) -> Assignment:
    key = ASSIGNMENT
    root = _obj(_load(text, key), key)
    _version(root, key)
    node = _str(root, "node", key)
    raw = _obj(root.get("containers"), f"{key}.containers")
    if not raw:
        # The scheduler assigns only GPU pods, which have at least one GPU container; an
        # empty assignment would leave the node agent nothing to match Allocate against.
        raise CodecError(f"{key}.containers: expected at least one container")
    containers: dict[str, tuple[GrantedDevice, ...]] = {}
    for name, items in raw.items():
        where = f"{key}.containers.{name}"
        if not name:
            raise CodecError(f"{key}.containers: a container name is empty")
        if not isinstance(items, list) or not items:
            raise CodecError(f"{where}: expected a non-empty list of devices")
        granted: list[GrantedDevice] = []
        for i, item in enumerate(items):
            obj = _obj(item, f"{where}[{i}]")
            granted.append(GrantedDevice(
                uuid=_str(obj, "uuid", f"{where}[{i}]"),
                memory_mib=_int(obj, "memory_mib", f"{where}[{i}]", hi=limits.GPU_MEMORY_MIB),
                cores=_int(obj, "cores", f"{where}[{i}]", hi=limits.GPU_CORES),
            ))
        if len(granted) > limits.GPUS_PER_NODE:
            raise CodecError(f"{where}: {len(granted)} vGPUs, more than the "
                             f"{limits.GPUS_PER_NODE} a node may have")
        uuids = [g.uuid for g in granted]
        if len(set(uuids)) != len(uuids):
            raise CodecError(f"{where}: a container's vGPUs must be on distinct GPUs")
        containers[name] = tuple(granted)
    # An open set, as a mode in the inventory: a scope this vgpu does not know trusts no
    # other pod (vgpu.fault_domains.trusts).
    scope = None if root.get("fault_domain") is None else _str(root, "fault_domain", key)
    user = None if root.get("run_as_user") is None else _int(root, "run_as_user", key,
                                                             hi=limits.UID)
    return Assignment(node=node, containers=containers,
                      priorities=_priorities(root, containers, key), fault_domain=scope,
                      run_as_user=user)


def assignment_of(obj: Mapping[str, Any]) -> Assignment | None:
    """The pod's ``vgpu.io/assignment``, decoded; None when it has none. Raises
    :class:`CodecError` when it cannot be read: each caller reports that its own way."""
    raw = meta.annotations_of(obj).get(ASSIGNMENT)
    return None if raw is None else of_pod(decode_assignment(raw), obj)


def of_pod(assignment: Assignment, pod: Mapping[str, Any]) -> Assignment:
    """``assignment`` with the pod's init containers that end before its app containers
    (from the spec, which cannot change)."""
    names = before_apps(pod)
    if names:
        names = names.intersection(assignment.containers)
    return dataclasses.replace(assignment, before_apps=names) if names else assignment
