"""The one admission rule: a pod that asks for vGPUs is placed by vgpu, or refused.

Every way a GPU pod could reach a node, or a GPU, without vgpu's scheduler accounting for
its slice is denied here, each with what to do instead: a pod bound at creation
(``spec.nodeName``), one naming a scheduler vgpu does not trust (``extraSchedulerNames``
lists a second vGPU-aware scheduler), a privileged container (it sees every GPU of its
node), and a container that sets the variables the node agent's Allocate answer owns
(``NVIDIA_VISIBLE_DEVICES`` given in a container's own ``env`` wins over the answer, and
hands the container whichever GPUs it names). Ephemeral containers are added after
creation, so ``/validate`` refuses them (:mod:`vgpu_webhook.validate`).

Pure: the pod as the webhook parsed it in, the reason for a denial (or None) out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu.config import Config
from vgpu.pods import DEFAULT_SCHEDULER
from vgpu.requests import ParsedPod

#: Variables of the Allocate answer (docs/contracts.md#allocate-answer) that a container
#: must not set itself: the kubelet puts a container's own ``env`` after the device
#: plugin's, so the container's value is the one the runtime and HAMi-core read.
GRANT_VARIABLES = frozenset({
    "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_MEMORY_SHARED_CACHE",
    "CUDA_OVERSUBSCRIBE", "CUDA_TASK_PRIORITY", "CUDA_MPS_PIPE_DIRECTORY",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
})
#: ``CUDA_DEVICE_MEMORY_LIMIT`` and ``CUDA_DEVICE_MEMORY_LIMIT_<i>``.
GRANT_PREFIX = "CUDA_DEVICE_MEMORY_LIMIT"


def grant_variable(name: str) -> bool:
    return name in GRANT_VARIABLES or name.startswith(GRANT_PREFIX)


def _privileged(container: Mapping[str, Any]) -> bool:
    security = container.get("securityContext")
    return isinstance(security, Mapping) and security.get("privileged") is True


#: ``NVIDIA_VISIBLE_DEVICES`` values that hide every GPU (what ``overwriteEnv`` writes):
#: harmless, so a container may set them.
HIDING = ("none", "void")


def _hides(entry: Mapping[str, Any]) -> bool:
    return (entry.get("name") == "NVIDIA_VISIBLE_DEVICES" and "valueFrom" not in entry
            and entry.get("value") in HIDING)


def _grant_variables(container: Mapping[str, Any]) -> list[str]:
    env = container.get("env")
    if not isinstance(env, list):
        return []
    return sorted({str(e["name"]) for e in env
                   if isinstance(e, Mapping) and isinstance(e.get("name"), str)
                   and grant_variable(e["name"]) and not _hides(e)})


def _scheduler(spec: Mapping[str, Any], config: Config) -> str | None:
    name = spec.get("schedulerName")
    if name is None or (isinstance(name, str) and (
            name in ("", DEFAULT_SCHEDULER) or name in config.vgpu_schedulers)):
        return None
    prefix = config.resource_names.gpu.split("/")[0]
    return (f"spec.schedulerName is {name!r}: a pod that asks for {prefix}/* resources is "
            f"placed by vgpu's scheduler, which accounts for every GPU slice, and another "
            f"scheduler would place it on a GPU someone else holds; remove "
            f"spec.schedulerName (the webhook sets {config.scheduler_name!r}), or have the "
            f"operator list a second vGPU-aware scheduler in vgpu's extraSchedulerNames")


def _node_name(spec: Mapping[str, Any]) -> str | None:
    node = spec.get("nodeName")
    if not node:
        return None
    return (f"spec.nodeName is set to {node!r}: a pod placed on a node directly bypasses the "
            f"vgpu scheduler, so its GPU share would not be accounted; remove spec.nodeName "
            f"and use a nodeSelector (kubernetes.io/hostname: {node}) instead")


def _containers(parsed: ParsedPod, config: Config) -> str | None:
    prefix = config.resource_names.gpu.split("/")[0]
    for spec_container in parsed.containers:
        name, container = spec_container.name, spec_container.container
        if _privileged(container):
            return (f"container {name!r} is privileged in a pod that asks for vGPUs: a "
                    f"privileged container sees every GPU of the node, so the pod's share "
                    f"cannot be enforced; drop securityContext.privileged, or run it in a pod "
                    f"of its own without {prefix}/* resources")
        names = _grant_variables(container)
        if names:
            return (f"container {name!r} sets {', '.join(names)}: the node agent sets "
                    f"these from the GPU slice the scheduler assigned, and a container's own "
                    f"value would override them (NVIDIA_VISIBLE_DEVICES names the GPUs it "
                    f"sees); remove them from its env")
    return None


def route_around(parsed: ParsedPod, config: Config) -> str | None:
    """Why a GPU pod would get GPUs without vgpu placing it, or None; the message says
    what to do instead."""
    return (_node_name(parsed.spec) or _scheduler(parsed.spec, config)
            or _containers(parsed, config))
