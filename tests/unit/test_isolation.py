"""Isolation modes: the node label, the pod's requirement, the fit rule, and old
inventories (version 1, written before modes were reported) still decoding."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu import isolation_modes
from vgpu.codecs import INVENTORY_VERSION, decode_inventory, encode_inventory
from vgpu.config import from_mapping
from vgpu.errors import ConfigError, RequestError


@pytest.mark.parametrize(("default", "label", "mode", "error"), [
    ("hami-core", None, "hami-core", None),
    ("hami-core", "mps", "mps", None),
    ("mps", "none", "none", None),
    ("none", " hami-core ", "hami-core", None),
    ("hami-core", "MPS", "hami-core", "is not an isolation mode"),
    ("mps", "cuda", "mps", "running the cluster default 'mps'"),
    ("none", "", "none", "vgpu.io/isolation=''"),
])
def test_node_label_overrides_the_default(default: str, label: str | None, mode: str,
                                          error: str | None) -> None:
    choice = isolation_modes.resolve_mode(default, label)
    assert choice.mode == mode
    if error is None:
        assert choice.error is None
    else:
        assert choice.error is not None and error in choice.error


@pytest.mark.parametrize(("annotations", "default", "expected"), [
    (None, False, False),
    (None, True, True),
    ({"vgpu.io/require-isolation": "true"}, False, True),
    ({"vgpu.io/require-isolation": "False"}, True, False),
    ({"vgpu.io/require-isolation": "1"}, False, True),
])
def test_pod_requirement(annotations: dict[str, str] | None, default: bool,
                         expected: bool) -> None:
    assert isolation_modes.required(annotations, default) is expected


def test_a_malformed_requirement_is_a_request_error() -> None:
    with pytest.raises(RequestError, match="require-isolation: 'maybe' is not a boolean"):
        isolation_modes.required({"vgpu.io/require-isolation": "maybe"}, False)


ENFORCING = ("mps", "hami-core")


@pytest.mark.parametrize(("need", "modes", "fits"), [
    (False, [], True),
    (False, ["none"], True),
    (True, ["mps", "mps"], True),
    (True, ["hami-core"], True),
    (True, ["mps", "none"], False),
    (True, ["unknown"], False),
    (True, ["future-mode"], False),
    (True, [], False),
])
def test_fit_needs_every_gpu_enforcing(need: bool, modes: list[str], fits: bool) -> None:
    assert isolation_modes.fits(need, modes, ENFORCING) is fits


def test_split_above_the_mps_client_limit_is_refused() -> None:
    with pytest.raises(ConfigError, match="above the MPS client limit"):
        from_mapping({"isolation": {"mode": "mps"}, "deviceSplitCount": 49})
    assert from_mapping({"isolation": {"mode": "mps"}, "deviceSplitCount": 48})
    assert from_mapping({"isolation": {"mode": "mps", "mps": {"maxClients": 64}},
                         "deviceSplitCount": 60})
    # The limit is MPS's: other modes may split further.
    assert from_mapping({"isolation": {"mode": "hami-core"}, "deviceSplitCount": 100})


def test_unknown_mode_in_config_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"isolation\.mode: 'cuda' is not allowed"):
        from_mapping({"isolation": {"mode": "cuda"}})


_v1_device = st.fixed_dictionaries({
    "uuid": st.text(min_size=1, max_size=10), "index": st.integers(0, 16),
    "model": st.text(min_size=1, max_size=10), "memory_mib": st.integers(1, 2**20),
    "cores": st.integers(1, 100), "split": st.integers(1, 64), "numa": st.integers(-1, 4),
    "healthy": st.booleans()})


@given(st.lists(_v1_device, max_size=6, unique_by=lambda d: d["uuid"]))
def test_version_1_inventories_still_decode_as_unknown_mode(devices: list[dict[str, Any]]) -> None:
    text = json.dumps({"version": 1, "devices": devices})
    inventory = decode_inventory(text)
    assert inventory.version == 1
    assert [d.uuid for d in inventory.devices] == [d["uuid"] for d in devices]
    assert all(d.isolation == isolation_modes.UNKNOWN for d in inventory.devices)
    # Re-encoded, it is a current inventory that says what it knows: unknown.
    again = json.loads(encode_inventory(inventory))
    assert again["version"] == INVENTORY_VERSION
    assert [d["isolation"] for d in again["devices"]] == ["unknown"] * len(devices)
    assert decode_inventory(json.dumps(again)) == inventory
