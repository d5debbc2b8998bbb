"""Annotation codecs: round trips, and every malformed annotation named with its path."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.annotations import ASSIGNMENT, BIND_TIME, NODE_GPUS, NODE_HEARTBEAT
from vgpu.codecs import (
    VERSION,
    Assignment,
    GrantedDevice,
    NodeInventory,
    bind_time,
    decode_assignment,
    decode_inventory,
    decode_time,
    encode_assignment,
    encode_heartbeat,
    encode_inventory,
)
from vgpu.devices import Device
from vgpu.errors import CodecError

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
            memory_mib=draw(st.integers(1, 2**40)),
            cores=draw(st.integers(1, 100)),
            split=draw(st.integers(1, 1024)),
            numa=draw(st.integers(-1, 8)),
            healthy=draw(st.booleans()),
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
            GrantedDevice(uuid=u, memory_mib=draw(st.integers(0, 2**40)),
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
                    cores=100, split=10, numa=1, healthy=True)
    wire = json.loads(encode_inventory(NodeInventory(devices=(device,))))
    assert wire == {"version": 1, "devices": [{
        "uuid": "GPU-1", "index": 0, "model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960,
        "cores": 100, "split": 10, "numa": 1, "healthy": True}]}


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


# --- malformed annotations ---------------------------------------------------------------

DEV: dict[str, Any] = {"uuid": "GPU-1", "index": 0, "model": "T4", "memory_mib": 15360,
                       "cores": 100, "split": 10, "numa": 0, "healthy": True}


def inv(*devices: Any, version: Any = 1) -> str:
    return json.dumps({"version": version, "devices": list(devices)})


def dev(**changes: Any) -> dict[str, Any]:
    out = {**DEV, **changes}
    return {k: v for k, v in out.items() if v is not ...}


BAD_INVENTORY: list[tuple[str, Any, str]] = [
    ("not-a-string", {"version": 1}, "expected a JSON string"),
    ("bytes", b'{"version": 1}', "expected a JSON string"),
    ("not-json", "{version: 1}", "not valid JSON"),
    ("empty-text", "", "not valid JSON"),
    ("truncated", inv(DEV)[:-5], "not valid JSON"),
    ("too-deep", "[" * 100_000, "not valid JSON"),
    ("huge-number", '{"version": 1' + "0" * 5000 + "}", "not valid JSON"),
    ("top-level-list", "[1, 2]", "expected an object"),
    ("wrong-version", inv(DEV, version=2), "unsupported version 2"),
    ("version-string", inv(DEV, version="1"), 'unsupported version "1"'),
    ("no-version", json.dumps({"devices": [DEV]}), "unsupported version null"),
    ("no-devices", '{"version": 1}', ".devices: expected a list"),
    ("devices-object", '{"version": 1, "devices": {}}', ".devices: expected a list"),
    ("device-not-object", inv(DEV, 5), ".devices[1]: expected an object"),
    ("missing-uuid", inv(dev(uuid=...)), ".devices[0].uuid: expected a non-empty string"),
    ("empty-uuid", inv(dev(uuid="")), ".devices[0].uuid: expected a non-empty string"),
    ("uuid-number", inv(dev(uuid=7)), ".devices[0].uuid: expected a non-empty string"),
    ("missing-model", inv(dev(model=...)), ".devices[0].model"),
    ("index-negative", inv(dev(index=-1)), ".devices[0].index: -1 is below 0"),
    ("index-string", inv(dev(index="0")), ".devices[0].index: expected an integer"),
    ("index-float", inv(dev(index=0.0)), ".devices[0].index: expected an integer"),
    ("index-bool", inv(dev(index=True)), ".devices[0].index: expected an integer"),
    ("memory-zero", inv(dev(memory_mib=0)), ".devices[0].memory_mib: 0 is below 1"),
    ("memory-missing", inv(dev(memory_mib=...)), ".devices[0].memory_mib: expected an integer"),
    ("cores-zero", inv(dev(cores=0)), ".devices[0].cores: 0 is below 1"),
    ("split-zero", inv(dev(split=0)), ".devices[0].split: 0 is below 1"),
    ("numa-below-minus-one", inv(dev(numa=-2)), ".devices[0].numa: -2 is below -1"),
    ("healthy-string", inv(dev(healthy="true")), ".devices[0].healthy: expected true or false"),
    ("healthy-missing", inv(dev(healthy=...)), ".devices[0].healthy"),
    ("duplicate-uuid", inv(DEV, dev(index=1)), ".devices[1].uuid: GPU-1 appears twice"),
]


@pytest.mark.parametrize(("text", "fragment"), [b[1:] for b in BAD_INVENTORY],
                         ids=[b[0] for b in BAD_INVENTORY])
def test_malformed_inventory(text: Any, fragment: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_inventory(text)
    message = str(caught.value)
    assert message.startswith(NODE_GPUS)
    assert fragment in message, f"{fragment!r} not in {message!r}"


GRANT: dict[str, Any] = {"uuid": "GPU-1", "memory_mib": 3000, "cores": 30}


def asg(containers: Any = None, *, node: Any = "node-1", version: Any = 1) -> str:
    return json.dumps({"version": version, "node": node,
                       "containers": {"main": [GRANT]} if containers is None else containers})


BAD_ASSIGNMENT: list[tuple[str, Any, str]] = [
    ("none", None, "expected a JSON string"),
    ("not-json", "node=1", "not valid JSON"),
    ("too-deep", '{"a":' * 100_000, "not valid JSON"),
    ("top-level-string", '"x"', "expected an object"),
    ("wrong-version", asg(version=0), "unsupported version 0"),
    ("missing-node", json.dumps({"version": 1, "containers": {"main": [GRANT]}}),
     ".node: expected a non-empty string"),
    ("empty-node", asg(node=""), ".node: expected a non-empty string"),
    ("missing-containers", json.dumps({"version": 1, "node": "n"}),
     ".containers: expected an object"),
    ("containers-list", asg([GRANT]), ".containers: expected an object"),
    ("no-containers", asg({}), ".containers: expected at least one container"),
    ("empty-container-name", asg({"": [GRANT]}), ".containers: a container name is empty"),
    ("empty-device-list", asg({"main": []}), ".containers.main: expected a non-empty list"),
    ("device-list-object", asg({"main": GRANT}), ".containers.main: expected a non-empty list"),
    ("device-not-object", asg({"main": ["GPU-1"]}), ".containers.main[0]: expected an object"),
    ("missing-uuid", asg({"main": [{"memory_mib": 1, "cores": 0}]}),
     ".containers.main[0].uuid: expected a non-empty string"),
    ("memory-string", asg({"main": [{**GRANT, "memory_mib": "3000"}]}),
     ".containers.main[0].memory_mib: expected an integer"),
    ("memory-negative", asg({"main": [{**GRANT, "memory_mib": -1}]}),
     ".containers.main[0].memory_mib: -1 is below 0"),
    ("cores-float", asg({"main": [GRANT, {**GRANT, "uuid": "GPU-2", "cores": 1.5}]}),
     ".containers.main[1].cores: expected an integer"),
    ("cores-null", asg({"sidecar": [{**GRANT, "cores": None}]}),
     ".containers.sidecar[0].cores: expected an integer, got null"),
    ("duplicate-uuid-in-container", asg({"main": [GRANT, GRANT]}),
     ".containers.main: a container's vGPUs must be on distinct GPUs"),
    ("priorities-list", json.dumps({**json.loads(asg()), "priorities": [1]}),
     ".priorities: expected an object"),
    ("priority-of-unknown-container", json.dumps({**json.loads(asg()), "priorities": {"x": 1}}),
     ".priorities.x: not a container of the assignment"),
    ("priority-string", json.dumps({**json.loads(asg()), "priorities": {"main": "1"}}),
     ".priorities.main: expected an integer"),
    ("priority-negative", json.dumps({**json.loads(asg()), "priorities": {"main": -1}}),
     ".priorities.main: -1 is below 0"),
]


@pytest.mark.parametrize(("text", "fragment"), [b[1:] for b in BAD_ASSIGNMENT],
                         ids=[b[0] for b in BAD_ASSIGNMENT])
def test_malformed_assignment(text: Any, fragment: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_assignment(text)
    message = str(caught.value)
    assert message.startswith(ASSIGNMENT)
    assert fragment in message, f"{fragment!r} not in {message!r}"


def test_two_containers_may_share_a_gpu() -> None:
    text = asg({"a": [GRANT], "b": [GRANT]})
    assert set(decode_assignment(text).containers) == {"a", "b"}


def test_version_constant() -> None:
    assert VERSION == 1


# --- heartbeat and bind times ------------------------------------------------------------

UTC = dt.UTC
PLUS2 = dt.timezone(dt.timedelta(hours=2))

TIMES: list[tuple[str, str, dt.datetime]] = [
    ("z", "2024-05-01T12:00:00Z", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("lower-z", "2024-05-01T12:00:00z", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("fraction-z", "2024-05-01T12:00:00.250000Z",
     dt.datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)),
    ("offset", "2024-05-01T14:00:00+02:00", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("negative-offset", "2024-05-01T07:00:00-05:00", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("zero-offset", "2024-05-01T12:00:00+00:00", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
    ("surrounding-space", " 2024-05-01T12:00:00Z ", dt.datetime(2024, 5, 1, 12, tzinfo=UTC)),
]


@pytest.mark.parametrize(("text", "expected"), [t[1:] for t in TIMES], ids=[t[0] for t in TIMES])
def test_decode_time(text: str, expected: dt.datetime) -> None:
    got = decode_time(text)
    assert got == expected
    assert got.tzinfo is not None


BAD_TIMES: list[tuple[str, Any, str]] = [
    ("naive", "2024-05-01T12:00:00", "no time zone"),
    ("date-only", "2024-05-01", "no time zone"),
    ("garbage", "yesterday", "not an RFC 3339 time"),
    ("empty", "", "not an RFC 3339 time"),
    ("month-13", "2024-13-01T00:00:00Z", "not an RFC 3339 time"),
    ("number", 1714564800, "expected an RFC 3339 time string"),
    ("none", None, "expected an RFC 3339 time string"),
]


@pytest.mark.parametrize(("text", "fragment"), [t[1:] for t in BAD_TIMES],
                         ids=[t[0] for t in BAD_TIMES])
def test_decode_time_rejects(text: Any, fragment: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_time(text)
    assert str(caught.value).startswith(NODE_HEARTBEAT)
    assert fragment in str(caught.value)


def test_decode_time_names_the_given_key() -> None:
    with pytest.raises(CodecError, match=f"^{BIND_TIME}: "):
        decode_time("soon", BIND_TIME)


@pytest.mark.parametrize(
    ("when", "text"),
    [
        (dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC), "2024-05-01T12:00:00.123456Z"),
        (dt.datetime(2024, 5, 1, 14, 0, tzinfo=PLUS2), "2024-05-01T12:00:00.000000Z"),
    ],
    ids=["utc", "offset-converted-to-utc"],
)
def test_encode_heartbeat(when: dt.datetime, text: str) -> None:
    assert encode_heartbeat(when) == text
    assert decode_time(text) == when


def test_encode_heartbeat_rejects_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        encode_heartbeat(dt.datetime(2024, 5, 1, 12))


@settings(max_examples=100, deadline=None)
@given(st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(9999, 1, 1),
                    timezones=st.integers(-14 * 60, 14 * 60).map(
                        lambda minutes: dt.timezone(dt.timedelta(minutes=minutes)))))
def test_heartbeat_round_trip(when: dt.datetime) -> None:
    assert decode_time(encode_heartbeat(when)) == when.astimezone(UTC)


@pytest.mark.parametrize(("annotations", "expected"), [
    ({BIND_TIME: "2024-05-01T10:00:00Z"},
     dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC).timestamp()),
    ({}, None),
    ({BIND_TIME: "yesterday"}, None),  # unreadable: the reader picks its own fallback
    ({BIND_TIME: 17}, None),
])
def test_bind_time(annotations: dict[str, Any], expected: float | None) -> None:
    assert bind_time(annotations) == expected
