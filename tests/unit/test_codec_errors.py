"""Malformed node inventories and assignments: every one refused, named with its path.

A table per annotation, separate from the round trips of ``test_codecs``: the error must
start with the annotation's key and point at the offending field.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from vgpu.annotations import ASSIGNMENT, NODE_GPUS
from vgpu.codecs import VERSION, decode_assignment, decode_inventory
from vgpu.errors import CodecError

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
    ("wrong-version", inv(DEV, version=4), "unsupported version 4"),
    ("v2-without-isolation", inv(DEV, version=2), ".devices[0].isolation: expected a non-empty"),
    ("v2-isolation-number", inv(dev(isolation=1), version=2), ".devices[0].isolation"),
    ("version-true", inv(DEV, version=True), "unsupported version true"),
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
    # Out of range (issue 36: one Node's cores of 2**31 stopped all GPU scheduling).
    ("cores-2-31", inv(dev(cores=2**31)), ".devices[0].cores: 2147483648 is above 100"),
    ("cores-101", inv(dev(cores=101)), ".devices[0].cores: 101 is above 100"),
    ("memory-2-63", inv(dev(memory_mib=2**63)),
     ".devices[0].memory_mib: 9223372036854775808 is above 4194304"),
    ("memory-huge", inv(dev(memory_mib=10**400)), ".devices[0].memory_mib: 1000000000"),
    ("split-2-63", inv(dev(split=2**63)), ".devices[0].split: 9223372036854775808 is above"),
    ("index-huge", inv(dev(index=2**40)), ".devices[0].index: 1099511627776 is above 1023"),
    ("numa-huge", inv(dev(numa=2**31)), ".devices[0].numa: 2147483648 is above 1023"),
    ("too-many-gpus", inv(*(dev(uuid=f"GPU-{i}", index=i % 1000) for i in range(129))),
     ".devices: 129 GPUs, more than the 128"),
    ("nvlinks-huge", json.dumps({"version": 3, "devices": [
        dev(isolation="none"), dev(uuid="GPU-2", index=1, isolation="none")],
        "links": [{"gpus": ["GPU-1", "GPU-2"], "pcie": "switch", "nvlinks": 2**31}]}),
     ".links[0].nvlinks: 2147483648 is above 64"),
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
    ("priority-two", json.dumps({**json.loads(asg()), "priorities": {"main": 2}}),
     ".priorities.main: 2 is above 1"),
    ("memory-2-63", asg({"main": [{**GRANT, "memory_mib": 2**63}]}),
     ".containers.main[0].memory_mib: 9223372036854775808 is above 4194304"),
    ("cores-over-100", asg({"main": [{**GRANT, "cores": 2**31}]}),
     ".containers.main[0].cores: 2147483648 is above 100"),
    ("too-many-vgpus", asg({"main": [{**GRANT, "uuid": f"GPU-{i}"} for i in range(129)]}),
     ".containers.main: 129 vGPUs, more than the 128"),
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
