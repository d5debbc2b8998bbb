from __future__ import annotations

import pytest

from vgpu_nodeagent.devices.discovery import GpuFacts
from vgpu_nodeagent.devices.inventory import inventory
from vgpu_nodeagent.devices.virtual import (
    PluginDevice,
    physical_uuid,
    plugin_devices,
    usable,
    virtual_id,
)

A = GpuFacts("GPU-a-1", 0, "A100", 40960, numa=0)
B = GpuFacts("GPU-b-2", 1, "A100", 40960, numa=-1, healthy=False)
M = GpuFacts("GPU-m", 2, "A100", 40960, mig=True)


@pytest.mark.parametrize(("device_id", "expected"), [
    ("GPU-a-1-0", "GPU-a-1"), ("GPU-a-1-12", "GPU-a-1"), ("GPU-b-2-3", "GPU-b-2"),
    ("GPU-a-1", None), ("GPU-a-1-x", None), ("GPU-zzz-0", None), ("", None),
])
def test_physical_uuid(device_id: str, expected: str | None) -> None:
    assert physical_uuid(device_id, {"GPU-a-1", "GPU-b-2"}) == expected


def test_round_trip() -> None:
    assert physical_uuid(virtual_id("GPU-a-1", 7), {"GPU-a-1"}) == "GPU-a-1"


def test_plugin_devices_carry_health_and_numa() -> None:
    assert plugin_devices([A, B], {"GPU-a-1"}, 2) == (
        PluginDevice("GPU-a-1-0", False, 0), PluginDevice("GPU-a-1-1", False, 0),
        PluginDevice("GPU-b-2-0", False, -1), PluginDevice("GPU-b-2-1", False, -1))
    assert [d.health for d in plugin_devices([A], set(), 1)] == ["Healthy"]


def test_mig_gpus_are_not_shared() -> None:
    assert usable([A, M, B]) == (A, B)


def test_inventory() -> None:
    devices = inventory([A, B], set(), 4).devices
    assert [(d.uuid, d.split, d.cores, d.numa, d.healthy) for d in devices] == [
        ("GPU-a-1", 4, 100, 0, True), ("GPU-b-2", 4, 100, -1, False)]
