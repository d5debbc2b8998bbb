"""The Allocate answer per isolation backend (docs/contracts.md#allocate-answer), and the
record of what it gives.

Pure: the granted slices, the GPUs' sizes and the configuration in, a
:class:`~vgpu_nodeagent.isolation.grants.ContainerGrant` out. Which backend answers is
decided live by :mod:`vgpu_nodeagent.isolation.mode` (a node configured for MPS falls back
while its daemon is down).

- ``none``: the GPUs only; nothing is limited.
- ``hami-core``: HAMi-core's environment (:mod:`vgpu_nodeagent.isolation.grants`), today's
  contract.
- ``mps``: the MPS pipe folder mounted, the per-GPU pinned memory limit
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=<i>=<MiB>M,...`` (``i`` = the GPU's index inside the
  container, i.e. its place in ``NVIDIA_VISIBLE_DEVICES``) and
  ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``. A whole GPU (all its memory, 100 cores) needs no
  limit, so an exclusive container gets none.
- ``mps-hami-core``: the ``mps`` answer, and HAMi-core's memory hooks beside it (its
  library preloaded, ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` per slice): under MPS alone CUDA
  reports the whole GPU as total memory, and frameworks that size their pools from the total
  (vLLM, TensorRT, JAX) reach past the pin; HAMi-core reports the grant as the total. Its
  compute limiter is off (``CUDA_DEVICE_SM_LIMIT=0``, ``GPU_CORE_UTILIZATION_POLICY=disable``):
  MPS's thread percentage holds compute, and HAMi-core's was not seen to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu import isolation_modes
from vgpu.codecs import GrantedDevice
from vgpu.config import CORE_POLICY_DISABLE, Config
from vgpu.devices import FULL_CORES
from vgpu_nodeagent.isolation import grants
from vgpu_nodeagent.isolation.grants import ContainerGrant, MountSpec

PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
MEMORY_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
THREADS_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#: The daemon's shared memory (the host folder ``isolation.mps.shmDir``) inside containers.
SHM_IN_CONTAINER = "/dev/shm"


def visible(devices: Sequence[GrantedDevice]) -> dict[str, str]:
    return {"NVIDIA_VISIBLE_DEVICES": ",".join(d.uuid for d in devices)}


def mps_memory_limits(devices: Sequence[GrantedDevice], totals: Mapping[str, int]) -> str:
    """``<i>=<MiB>M`` for each GPU granted less than its whole memory (comma-joined)."""
    limits = []
    for i, device in enumerate(devices):
        total = totals.get(device.uuid)
        # Oversubscribed grants (deviceMemoryScaling > 1) can exceed the card: no pin then.
        if total is None or device.memory_mib < total:
            limits.append(f"{i}={device.memory_mib}M")
    return ",".join(limits)


def mps_thread_percentage(devices: Sequence[GrantedDevice], config: Config) -> int | None:
    """One percentage per client (MPS applies it to each of its GPUs), as HAMi-core's one
    limiter per container: the container's share. 0 (no share asked) and 100 limit nothing."""
    if config.core_policy == CORE_POLICY_DISABLE:
        return None
    cores = max((d.cores for d in devices), default=0)
    return cores if 0 < cores < FULL_CORES else None


def mps_grant(devices: Sequence[GrantedDevice], *, container: str, totals: Mapping[str, int],
              config: Config) -> ContainerGrant:
    mps = config.isolation.mps
    envs = visible(devices) | {PIPE_ENV: mps.pipe_dir}
    memory = mps_memory_limits(devices, totals)
    if memory:
        envs[MEMORY_ENV] = memory
    threads = mps_thread_percentage(devices, config)
    if threads is not None:
        envs[THREADS_ENV] = str(threads)
    mounts = [MountSpec(mps.pipe_dir, mps.pipe_dir, False)]
    if mps.shm_dir:
        mounts.append(MountSpec(SHM_IN_CONTAINER, mps.shm_dir, False))
    return ContainerGrant(container=container, devices=tuple(devices), envs=envs,
                          mounts=tuple(mounts))


#: HAMi-core's variables that the combined mode does not hand over: MPS holds compute, and
#: an MPS pin cannot be oversubscribed into host memory, nor does MPS read a priority.
_NOT_WITH_MPS = ("CUDA_OVERSUBSCRIBE", "CUDA_TASK_PRIORITY")


def mps_hami_grant(devices: Sequence[GrantedDevice], *, pod_uid: str, container: str,
                   totals: Mapping[str, int], config: Config) -> ContainerGrant:
    """MPS's limits, with HAMi-core preloaded for what CUDA reports as the memory."""
    base = mps_grant(devices, container=container, totals=totals, config=config)
    hami = grants.container_envs(devices, pod_uid=pod_uid, container=container,
                                 priority=None, config=config)
    hami["CUDA_DEVICE_SM_LIMIT"] = "0"
    hami["GPU_CORE_UTILIZATION_POLICY"] = "disable"
    for name in _NOT_WITH_MPS:
        hami.pop(name, None)
    mounts = grants.container_mounts(pod_uid=pod_uid, container=container, config=config)
    return ContainerGrant(container=container, devices=tuple(devices),
                          envs=dict(base.envs) | hami, mounts=base.mounts + mounts)


def answer(backend: str, devices: Sequence[GrantedDevice], *, pod_uid: str, container: str,
           priority: int | None, totals: Mapping[str, int], config: Config) -> ContainerGrant:
    """The grant of one container under ``backend`` (one of :data:`vgpu.isolation_modes.MODES`)."""
    if backend == isolation_modes.MPS:
        return mps_grant(devices, container=container, totals=totals, config=config)
    if backend == isolation_modes.MPS_HAMI_CORE:
        return mps_hami_grant(devices, pod_uid=pod_uid, container=container, totals=totals,
                              config=config)
    if backend == isolation_modes.NONE:
        return ContainerGrant(container=container, devices=tuple(devices),
                              envs=visible(devices))
    return grants.grant(devices, pod_uid=pod_uid, container=container, priority=priority,
                        config=config)
