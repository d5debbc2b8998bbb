"""What Allocate hands a container: the environment HAMi-core reads, and its mounts.

HAMi-core's ``libvgpu.so``, preloaded into every process of the container, enforces the
limits these variables carry (docs/contracts.md#allocate-answer). Without the library the
variables are harmless, and an image that ships HAMi-core itself still honours them.
"""

from __future__ import annotations

import os.path
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vgpu.codecs import GrantedDevice
from vgpu.config import CORE_POLICY_DISABLE, CORE_POLICY_FORCE, Config

#: Where the library and the preload list appear inside the container (HAMi's layout).
LIBRARY_IN_CONTAINER = "/usr/local/vgpu/libvgpu.so"
PRELOAD_IN_CONTAINER = "/etc/ld.so.preload"
PRELOAD_FILE = "ld.so.preload"
#: HAMi-core serialises device initialisation across containers with lock files here; the
#: host folder mounted there is the agent's own (vgpu_nodeagent/isolation/host_dirs.py).
LOCK_DIR = "/tmp/vgpulock"
LOCK_FOLDER = "vgpulock"
#: The folder of the containers' own cache folders, under nodeagent.sharedCacheDir.
CONTAINERS = "containers"


@dataclass(frozen=True)
class MountSpec:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True)
class ContainerGrant:
    """The Allocate answer for one container, before it becomes protobuf."""

    container: str
    devices: tuple[GrantedDevice, ...]
    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[MountSpec, ...] = ()


def cache_name(pod_uid: str, container: str) -> str:
    return f"{pod_uid}_{container}"


def container_envs(devices: Sequence[GrantedDevice], *, pod_uid: str, container: str,
                   priority: int | None, config: Config) -> dict[str, str]:
    """The environment of one container given its granted slices (in assignment order).

    ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` is indexed like ``NVIDIA_VISIBLE_DEVICES``: device ``i``
    inside the container is the ``i``-th UUID.
    """
    envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(d.uuid for d in devices)}
    for i, device in enumerate(devices):
        envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = f"{device.memory_mib}m"
    if config.core_policy == CORE_POLICY_DISABLE:
        # 0 is "no limit" to HAMi-core; the policy variable makes that explicit.
        envs["CUDA_DEVICE_SM_LIMIT"] = "0"
        envs["GPU_CORE_UTILIZATION_POLICY"] = CORE_POLICY_DISABLE
    else:
        # One limiter per container: every vGPU of a container asked the same share.
        envs["CUDA_DEVICE_SM_LIMIT"] = str(max((d.cores for d in devices), default=0))
        if config.core_policy == CORE_POLICY_FORCE:
            # HAMi's gpuCorePolicy: force: the limit holds even for a task alone.
            envs["GPU_CORE_UTILIZATION_POLICY"] = CORE_POLICY_FORCE
    cache_dir = config.nodeagent.shared_cache_dir.rstrip("/") or "/"
    envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = os.path.join(
        cache_dir, f"{cache_name(pod_uid, container)}.cache")
    if config.device_memory_scaling > 1:
        envs["CUDA_OVERSUBSCRIBE"] = "true"
    if priority is not None:
        envs["CUDA_TASK_PRIORITY"] = str(priority)
    return envs


def container_cache_host_dir(pod_uid: str, container: str, config: Config) -> str:
    """Host folder mounted over the shared-cache folder of one container, so the cache file
    of each container is its own and visible on the host."""
    return os.path.join(config.nodeagent.shared_cache_dir, CONTAINERS,
                        cache_name(pod_uid, container))


def lock_host_path(config: Config) -> str:
    """The host folder mounted at :data:`LOCK_DIR`: made by the agent, never a host
    ``/tmp`` path a tenant could plant a link at."""
    return os.path.join(config.nodeagent.shared_cache_dir, LOCK_FOLDER)


def preload_host_path(config: Config) -> str:
    return os.path.join(config.nodeagent.shared_cache_dir, PRELOAD_FILE)


def preload_content() -> str:
    return LIBRARY_IN_CONTAINER + "\n"


def container_mounts(*, pod_uid: str, container: str, config: Config) -> tuple[MountSpec, ...]:
    """HAMi-core's mounts, or none when ``nodeagent.hamiCorePath`` is not configured."""
    library = config.nodeagent.hami_core_path
    if not library:
        return ()
    return (
        MountSpec(LIBRARY_IN_CONTAINER, library, True),
        MountSpec(PRELOAD_IN_CONTAINER, preload_host_path(config), True),
        MountSpec(config.nodeagent.shared_cache_dir,
                  container_cache_host_dir(pod_uid, container, config), False),
        MountSpec(LOCK_DIR, lock_host_path(config), False),
    )


def grant(devices: Sequence[GrantedDevice], *, pod_uid: str, container: str,
          priority: int | None, config: Config) -> ContainerGrant:
    return ContainerGrant(
        container=container,
        devices=tuple(devices),
        envs=container_envs(devices, pod_uid=pod_uid, container=container, priority=priority,
                            config=config),
        mounts=container_mounts(pod_uid=pod_uid, container=container, config=config),
    )

