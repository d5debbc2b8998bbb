"""Annotation codecs: round trips, and the wire shape docs/contracts.md gives each
annotation (#node-inventory, #pod-assignment).

Malformed annotations (each named with its path) are in ``test_codec_errors``, the
heartbeat and bind times in ``test_codec_times``.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu import limits
from vgpu.codecs import (
    Assignment,
    GrantedDevice,
    NodeInventory,
    decode_assignment,
    decode_inventory,
    encode_assignment,
    encode_inventory,
)
from vgpu.devices import Device

# --- round trips -------------------------------------------------------------------------

_names = st.text(min_size=1, max_size=12)
_uuids = st.one_of(
    st.uuids().map(lambda u: f"GPU-{u}"),
    st.text(min_size=1, max_size=10),
)


@st.composite
def inventories(draw: st.DrawFn) -> NodeInventory:
    uuids = draw(st.lists(_uuids, unique=True, max_size=8))
    devices = tuple(
        Device(
            uuid=uuid,
            index=draw(st.integers(0, 64)),
            model=draw(_names),
            memory_mib=draw(st.integers(1, limits.GPU_MEMORY_MIB)),
            cores=draw(st.integers(1, 100)),
            split=draw(st.integers(1, 1024)),
            numa=draw(st.integers(-1, 8)),
            healthy=draw(st.booleans()),
            isolation=draw(st.one_of(st.sampled_from(("none", "hami-core", "mps", "unknown")),
                                     st.text(min_size=1, max_size=8))),
        )
        for uuid in uuids
    )
    return NodeInventory(devices=devices)


@st.composite
def assignments(draw: st.DrawFn) -> Assignment:
    names = draw(st.lists(_names, unique=True, min_size=1, max_size=5))
    containers: dict[str, tuple[GrantedDevice, ...]] = {}
    for name in names:
        uuids = draw(st.lists(_uuids, unique=True, min_size=1, max_size=4))
        containers[name] = tuple(
            GrantedDevice(uuid=u, memory_mib=draw(st.integers(0, limits.GPU_MEMORY_MIB)),
                          cores=draw(st.integers(0, 100)))
            for u in uuids
        )
    with_priority = draw(st.lists(st.sampled_from(names), unique=True))
    return Assignment(node=draw(_names), containers=containers,
                      priorities={name: draw(st.integers(0, 1)) for name in with_priority})


@settings(max_examples=100, deadline=None)
@given(inventories())
def test_inventory_round_trip(inventory: NodeInventory) -> None:
    text = encode_inventory(inventory)
    assert decode_inventory(text) == inventory
    # Deterministic text: the node agent compares it to skip no-op patches.
    assert encode_inventory(decode_inventory(text)) == text


@settings(max_examples=100, deadline=None)
@given(assignments())
def test_assignment_round_trip(assignment: Assignment) -> None:
    text = encode_assignment(assignment)
    assert decode_assignment(text) == assignment
    assert encode_assignment(decode_assignment(text)) == text


def test_inventory_wire_shape_is_design_section_5() -> None:
    device = Device(uuid="GPU-1", index=0, model="NVIDIA A100-SXM4-40GB", memory_mib=40960,
                    cores=100, split=10, numa=1, healthy=True, isolation="mps")
    wire = json.loads(encode_inventory(NodeInventory(devices=(device,))))
    assert wire == {"version": 3, "devices": [{
        "uuid": "GPU-1", "index": 0, "model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960,
        "cores": 100, "split": 10, "numa": 1, "healthy": True, "isolation": "mps"}]}


def test_assignment_wire_shape_is_design_section_5() -> None:
    assignment = Assignment(node="node-1", containers={
        "main": (GrantedDevice("GPU-1", 3000, 30), GrantedDevice("GPU-2", 3000, 30))})
    wire = json.loads(encode_assignment(assignment))
    assert wire == {"version": 1, "node": "node-1", "containers": {"main": [
        {"uuid": "GPU-1", "memory_mib": 3000, "cores": 30},
        {"uuid": "GPU-2", "memory_mib": 3000, "cores": 30}]}}


def test_assignment_priorities_are_optional_on_the_wire() -> None:
    # Containers that asked for a task priority carry it; an assignment without any (also
    # one written by an older scheduler) has no "priorities" key and reads as none.
    grant = (GrantedDevice("GPU-1", 3000, 30),)
    with_priority = Assignment("n", {"a": grant, "b": grant}, priorities={"a": 1})
    wire = json.loads(encode_assignment(with_priority))
    assert wire["priorities"] == {"a": 1}
    plain = Assignment("n", {"a": grant})
    assert "priorities" not in json.loads(encode_assignment(plain))
    assert decode_assignment(encode_assignment(plain)).priorities == {}


def test_empty_inventory_is_valid() -> None:
    # A node whose GPUs all went unhealthy publishes an empty list; that is news, not noise.
    assert decode_inventory('{"version": 1, "devices": []}') == NodeInventory(devices=())


def test_unknown_fields_are_ignored() -> None:
    text = ('{"version": 1, "node": "n", "extra": 1, "containers": '
            '{"c": [{"uuid": "u", "memory_mib": 1, "cores": 0, "note": "x"}]}}')
    assert decode_assignment(text) == Assignment("n", {"c": (GrantedDevice("u", 1, 0),)})
