from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.support.pods import slices
from vgpu.config import Config
from vgpu_nodeagent.isolation.grants import MountSpec, container_envs, container_mounts, grant

TWO = slices(("GPU-a", 3000, 30), ("GPU-b", 3000, 30))


def config(**values: Any) -> Config:
    nodeagent = {k: values.pop(k) for k in list(values)
                 if k in ("hami_core_path", "shared_cache_dir")}
    base = Config(**values)
    return dataclasses.replace(base, nodeagent=dataclasses.replace(base.nodeagent, **nodeagent))


BASE = {
    "NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b",
    "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
    "CUDA_DEVICE_MEMORY_LIMIT_1": "3000m",
    "CUDA_DEVICE_SM_LIMIT": "30",
    "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/vgpu/uid-1_main.cache",
}


@pytest.mark.parametrize(("settings", "priority", "changes"), [
    ({}, None, {}),
    ({}, 0, {"CUDA_TASK_PRIORITY": "0"}),
    ({}, 1, {"CUDA_TASK_PRIORITY": "1"}),
    ({"device_memory_scaling": 2.0}, None, {"CUDA_OVERSUBSCRIBE": "true"}),
    ({"device_memory_scaling": 1.0}, None, {}),
    ({"device_memory_scaling": 0.5}, None, {}),
    ({"disable_core_limit": True}, None,
     {"CUDA_DEVICE_SM_LIMIT": "0", "GPU_CORE_UTILIZATION_POLICY": "disable"}),
    # HAMi's gpuCorePolicy.
    ({"gpu_core_policy": "disable"}, None,
     {"CUDA_DEVICE_SM_LIMIT": "0", "GPU_CORE_UTILIZATION_POLICY": "disable"}),
    ({"gpu_core_policy": "force"}, None, {"GPU_CORE_UTILIZATION_POLICY": "force"}),
    ({"gpu_core_policy": "default"}, None, {}),
    ({"shared_cache_dir": "/var/run/vgpu/"}, None,
     {"CUDA_DEVICE_MEMORY_SHARED_CACHE": "/var/run/vgpu/uid-1_main.cache"}),
])
def test_envs(settings: dict[str, Any], priority: int | None, changes: dict[str, str]) -> None:
    got = container_envs(TWO, pod_uid="uid-1", container="main", priority=priority,
                         config=config(**settings))
    assert got == {**BASE, **changes}


def test_limits_are_indexed_in_visible_devices_order() -> None:
    got = container_envs(slices(("GPU-z", 100, 10), ("GPU-a", 200, 10)), pod_uid="u",
                         container="c", priority=None, config=Config())
    assert got["NVIDIA_VISIBLE_DEVICES"] == "GPU-z,GPU-a"
    assert (got["CUDA_DEVICE_MEMORY_LIMIT_0"], got["CUDA_DEVICE_MEMORY_LIMIT_1"]) == \
        ("100m", "200m")


def test_no_mounts_without_hami_core() -> None:
    assert container_mounts(pod_uid="u", container="c", config=Config()) == ()


def test_hami_core_mounts() -> None:
    cfg = config(hami_core_path="/usr/local/vgpu/libvgpu.so", shared_cache_dir="/tmp/vgpu")
    assert grant(TWO, pod_uid="u", container="c", priority=None, config=cfg).mounts == (
        MountSpec("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", True),
        MountSpec("/etc/ld.so.preload", "/tmp/vgpu/ld.so.preload", True),
        MountSpec("/tmp/vgpu", "/tmp/vgpu/containers/u_c", False),
        # The agent's own lock folder, under sharedCacheDir: never a host /tmp path.
        MountSpec("/tmp/vgpulock", "/tmp/vgpu/vgpulock", False),
    )
