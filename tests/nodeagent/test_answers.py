"""The Allocate answer per isolation backend: one GPU, several GPUs, several containers,
exclusive."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.support.pods import slices
from vgpu.codecs import GrantedDevice
from vgpu.config import Config, from_mapping
from vgpu_nodeagent.isolation.answers import answer
from vgpu_nodeagent.isolation.grants import MountSpec

TOTALS = {"GPU-a": 81559, "GPU-b": 81559, "GPU-c": 40960}
PIPE = "/run/vgpu/mps/pipe"


def mps_config(**mps: Any) -> Config:
    return from_mapping({"isolation": {"mode": "mps", "mps": mps}})


def run(backend: str, devices: tuple[GrantedDevice, ...], config: Config | None = None,
        container: str = "main") -> Any:
    return answer(backend, devices, pod_uid="uid-1", container=container, priority=None,
                  totals=TOTALS, config=config or mps_config())


@pytest.mark.parametrize(("devices", "envs"), [
    # the pod: gpumem 4096, gpucores 30 on one GPU
    (slices(("GPU-a", 4096, 30)), {
        "NVIDIA_VISIBLE_DEVICES": "GPU-a", "CUDA_MPS_PIPE_DIRECTORY": PIPE,
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}),
    # several GPUs: the index is the GPU's place in the container, not on the host
    (slices(("GPU-c", 2000, 50), ("GPU-a", 3000, 50)), {
        "NVIDIA_VISIBLE_DEVICES": "GPU-c,GPU-a", "CUDA_MPS_PIPE_DIRECTORY": PIPE,
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2000M,1=3000M",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}),
    # exclusive: cores 100 and the whole memory need no limit at all
    (slices(("GPU-a", 81559, 100)), {
        "NVIDIA_VISIBLE_DEVICES": "GPU-a", "CUDA_MPS_PIPE_DIRECTORY": PIPE}),
    # whole memory but a compute share: only the thread limit
    (slices(("GPU-c", 40960, 25)), {
        "NVIDIA_VISIBLE_DEVICES": "GPU-c", "CUDA_MPS_PIPE_DIRECTORY": PIPE,
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25"}),
    # no compute share asked (cores 0): memory only, as HAMi-core's "no limit"
    (slices(("GPU-a", 1024, 0)), {
        "NVIDIA_VISIBLE_DEVICES": "GPU-a", "CUDA_MPS_PIPE_DIRECTORY": PIPE,
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1024M"}),
    # oversubscribed memory (scaling > 1) above the card pins nothing on that GPU
    (slices(("GPU-c", 50000, 40), ("GPU-a", 100, 40)), {
        "NVIDIA_VISIBLE_DEVICES": "GPU-c,GPU-a", "CUDA_MPS_PIPE_DIRECTORY": PIPE,
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "1=100M",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "40"}),
    # a GPU whose size the agent does not know is pinned to the grant
    (slices(("GPU-x", 81559, 10)), {
        "NVIDIA_VISIBLE_DEVICES": "GPU-x", "CUDA_MPS_PIPE_DIRECTORY": PIPE,
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=81559M",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "10"}),
])
def test_mps_envs(devices: tuple[GrantedDevice, ...], envs: dict[str, str]) -> None:
    got = run("mps", devices)
    assert dict(got.envs) == envs
    assert got.mounts == (MountSpec(PIPE, PIPE, False),)
    assert got.devices == devices


def test_mps_several_containers_each_get_their_own_limits() -> None:
    pod = {"main": slices(("GPU-a", 4096, 30)), "side": slices(("GPU-a", 1024, 10))}
    got = {name: run("mps", devices, container=name) for name, devices in pod.items()}
    assert got["main"].envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert got["side"].envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=1024M"
    assert got["main"].envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert got["side"].envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "10"
    assert {g.container for g in got.values()} == {"main", "side"}


def test_mps_shm_and_paths_from_config() -> None:
    config = mps_config(pipeDir="/var/mps/p", shmDir="/var/mps/shm")
    got = run("mps", slices(("GPU-a", 4096, 30)), config)
    assert got.envs["CUDA_MPS_PIPE_DIRECTORY"] == "/var/mps/p"
    assert got.mounts == (MountSpec("/var/mps/p", "/var/mps/p", False),
                          MountSpec("/dev/shm", "/var/mps/shm", False))


def test_mps_without_core_limit_sets_no_thread_percentage() -> None:
    config = dataclasses.replace(mps_config(), disable_core_limit=True)
    got = run("mps", slices(("GPU-a", 4096, 30)), config)
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in got.envs


@pytest.mark.parametrize("devices", [slices(("GPU-a", 4096, 30)),
                                     slices(("GPU-a", 3000, 30), ("GPU-b", 3000, 30)),
                                     slices(("GPU-a", 81559, 100))])
def test_none_gives_the_gpus_only(devices: tuple[GrantedDevice, ...]) -> None:
    got = run("none", devices)
    assert dict(got.envs) == {"NVIDIA_VISIBLE_DEVICES": ",".join(d.uuid for d in devices)}
    assert got.mounts == ()


def test_hami_core_is_todays_answer() -> None:
    got = run("hami-core", slices(("GPU-a", 3000, 30), ("GPU-b", 3000, 30)), Config())
    assert dict(got.envs) == {
        "NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b", "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "3000m", "CUDA_DEVICE_SM_LIMIT": "30",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/vgpu/uid-1_main.cache"}
    assert not any(k.startswith("CUDA_MPS") for k in got.envs)


def test_mps_hami_core_adds_hamis_memory_hooks_and_leaves_compute_to_mps() -> None:
    config = from_mapping({"isolation": {"mode": "mps-hami-core"}, "deviceMemoryScaling": 2,
                           "nodeagent": {"hamiCorePath": "/opt/vgpu/libvgpu.so"}})
    got = answer("mps-hami-core", slices(("GPU-c", 2000, 50), ("GPU-a", 3000, 50)),
                 pod_uid="uid-1", container="main", priority=1, totals=TOTALS, config=config)
    assert dict(got.envs) == {
        "NVIDIA_VISIBLE_DEVICES": "GPU-c,GPU-a", "CUDA_MPS_PIPE_DIRECTORY": PIPE,
        # MPS holds memory (the pin) and compute (the threads) ...
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2000M,1=3000M",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
        # ... and HAMi-core reports each grant as the GPU's total, its limiter off; no
        # oversubscription (a pin is device memory) and no priority (MPS reads none).
        "CUDA_DEVICE_MEMORY_LIMIT_0": "2000m", "CUDA_DEVICE_MEMORY_LIMIT_1": "3000m",
        "CUDA_DEVICE_SM_LIMIT": "0", "GPU_CORE_UTILIZATION_POLICY": "disable",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/vgpu/uid-1_main.cache"}
    assert [m.container_path for m in got.mounts] == [
        PIPE, "/usr/local/vgpu/libvgpu.so", "/etc/ld.so.preload", "/tmp/vgpu",
        "/tmp/vgpulock"]
