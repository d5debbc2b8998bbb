"""Annotation keys of the wire contracts (docs/contracts.md#user-annotations
and #pod-annotations) and pod-level choices.

Pod annotations select which GPUs a pod may use and which policies place it; this module
parses them once so the webhook and the scheduler agree on every spelling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vgpu import policy
from vgpu.errors import RequestError

# Written by the node agent on its Node.
NODE_GPUS = "vgpu.io/node-gpus"
NODE_HEARTBEAT = "vgpu.io/node-heartbeat"

# Written by the scheduler (in the Binding) and advanced by the node agent.
ASSIGNMENT = "vgpu.io/assignment"
BIND_PHASE = "vgpu.io/bind-phase"
BIND_TIME = "vgpu.io/bind-time"
BIND_REASON = "vgpu.io/bind-reason"

# Written by the webhook: the gpumem-percentage each container gave, by container name
# (JSON, ``{"main": 50}``), when it turned them into absolute gpumem. For people reading
# the pod; no component acts on it.
GPUMEM_PERCENTAGE = "vgpu.io/gpumem-percentage"

PHASE_ALLOCATING = "allocating"
PHASE_SUCCESS = "success"
PHASE_FAILED = "failed"

# Written by users.
USE_GPUTYPE = "nvidia.com/use-gputype"
NOUSE_GPUTYPE = "nvidia.com/nouse-gputype"
USE_GPUUUID = "nvidia.com/use-gpuuuid"
NOUSE_GPUUUID = "nvidia.com/nouse-gpuuuid"
NUMA_BIND = "nvidia.com/numa-bind"
GPU_POLICY = "vgpu.io/gpu-scheduler-policy"
#: How a container of several vGPUs weighs the links between them: ``preferred`` (the
#: default: the fastest set that fits) or ``required`` (only the fastest set the node has).
GPU_TOPOLOGY = "vgpu.io/gpu-topology"
TOPOLOGY_PREFERRED = "preferred"
TOPOLOGY_REQUIRED = "required"
TOPOLOGY_MODES = (TOPOLOGY_PREFERRED, TOPOLOGY_REQUIRED)
NODE_POLICY = "vgpu.io/node-scheduler-policy"
# HAMi's spellings, accepted so that pods written for HAMi keep working.
GPU_POLICY_HAMI = "hami.io/gpu-scheduler-policy"
NODE_POLICY_HAMI = "hami.io/node-scheduler-policy"


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class GpuSelector:
    """Which GPUs a pod may land on, from its type/UUID/NUMA annotations.

    Types match as case-insensitive substrings of the GPU model (``A100`` matches
    ``NVIDIA A100-SXM4-40GB``); UUIDs match exactly.
    """

    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    numa_bind: bool = False

    def type_allowed(self, model: str) -> bool:
        if not (self.use_types or self.nouse_types):
            # Most pods name no type, and this runs per GPU per scheduling attempt (8 % of
            # the scheduler's CPU in a burst, py-spy): skip lowering the model.
            return True
        lowered = model.lower()
        if self.use_types and not any(t.lower() in lowered for t in self.use_types):
            return False
        return not any(t.lower() in lowered for t in self.nouse_types)

    def uuid_allowed(self, uuid: str) -> bool:
        if self.use_uuids and uuid not in self.use_uuids:
            return False
        return uuid not in self.nouse_uuids

    @property
    def unrestricted(self) -> bool:
        return not (self.use_types or self.nouse_types or self.use_uuids or self.nouse_uuids)


@dataclass(frozen=True)
class PodChoices:
    """Everything a pod's annotations say about its placement."""

    selector: GpuSelector = GpuSelector()
    gpu_policy: str | None = None
    node_policy: str | None = None
    topology: str = TOPOLOGY_PREFERRED

    @property
    def topology_required(self) -> bool:
        return self.topology == TOPOLOGY_REQUIRED


def _policy(annotations: Mapping[str, str], keys: tuple[str, str],
            allowed: tuple[str, ...]) -> str | None:
    for key in keys:
        value = annotations.get(key)
        if value is None:
            continue
        name = str(value).strip()
        if name not in allowed:
            raise RequestError(
                f"annotation {key}: unknown policy {value!r}; use one of {', '.join(allowed)}"
            )
        return name
    return None


def _bool(annotations: Mapping[str, str], key: str) -> bool:
    value = annotations.get(key)
    if value is None:
        return False
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no", ""):
        return False
    raise RequestError(f"annotation {key}: {value!r} is not a boolean; use \"true\" or \"false\"")


def _topology(annotations: Mapping[str, str]) -> str:
    value = annotations.get(GPU_TOPOLOGY)
    if value is None:
        return TOPOLOGY_PREFERRED
    mode = str(value).strip().lower()
    if mode not in TOPOLOGY_MODES:
        raise RequestError(f"annotation {GPU_TOPOLOGY}: {value!r} is not a topology mode; use "
                           f"{' or '.join(TOPOLOGY_MODES)}")
    return mode


_CHOICE_KEYS = (USE_GPUTYPE, NOUSE_GPUTYPE, USE_GPUUUID, NOUSE_GPUUUID, NUMA_BIND,
                GPU_POLICY, GPU_POLICY_HAMI, NODE_POLICY, NODE_POLICY_HAMI, GPU_TOPOLOGY)
# Most pods give none of these: one shared value instead of three objects a pod (the
# scheduler keeps one per pod in its cache).
_NO_CHOICES = PodChoices()


def parse_pod_choices(annotations: Mapping[str, str] | None) -> PodChoices:
    """Parse a pod's selection and policy annotations; a bad one raises RequestError."""
    ann = annotations or {}
    if not any(key in ann for key in _CHOICE_KEYS):
        return _NO_CHOICES
    selector = GpuSelector(
        use_types=_split(str(ann.get(USE_GPUTYPE, ""))),
        nouse_types=_split(str(ann.get(NOUSE_GPUTYPE, ""))),
        use_uuids=_split(str(ann.get(USE_GPUUUID, ""))),
        nouse_uuids=_split(str(ann.get(NOUSE_GPUUUID, ""))),
        numa_bind=_bool(ann, NUMA_BIND),
    )
    return PodChoices(
        selector=selector,
        gpu_policy=_policy(ann, (GPU_POLICY, GPU_POLICY_HAMI), policy.GPU_POLICIES),
        node_policy=_policy(ann, (NODE_POLICY, NODE_POLICY_HAMI), policy.NODE_POLICIES),
        topology=_topology(ann),
    )
