"""Annotation keys of the wire contracts (docs/contracts.md#user-annotations
and #pod-annotations) and pod-level choices.

Pod annotations select which GPUs a pod may use and which policies place it; this module
parses them once so the webhook and the scheduler agree on every spelling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vgpu import hami_fields, policy
from vgpu.errors import RequestError
from vgpu.hami_fields import HamiGpuPolicy, ScoringWeights
from vgpu.isolation_modes import MODES as _VGPU_MODES

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
# HAMi's spellings, read with HAMi's meaning (:mod:`vgpu.hami_fields`).
GPU_POLICY_HAMI = hami_fields.GPU_POLICY_HAMI
NODE_POLICY_HAMI = hami_fields.NODE_POLICY_HAMI
#: vgpu's GPU policies HAMi does not have: given in the ``hami.io/`` spelling they keep
#: vgpu's meaning, as they did before HAMi's own values were read as HAMi reads them.
_VGPU_ONLY_GPU_POLICIES = tuple(p for p in policy.GPU_POLICIES
                                if p not in (hami_fields.BINPACK, hami_fields.SPREAD))
#: A list entry no GPU type or UUID contains: HAMi's reading of a list that is not blank
#: but names nothing (``","``), which matches no GPU.
NOTHING = "\x00"


def _split(value: str) -> tuple[str, ...]:
    parts = tuple(part.strip() for part in value.split(",") if part.strip())
    return parts if parts or not value.strip() else (NOTHING,)


@dataclass(frozen=True)
class GpuSelector:
    """Which GPUs a pod may land on, from its type/UUID/NUMA annotations.

    Types match as case-insensitive substrings of the GPU's type as HAMi names it
    (:func:`vgpu.hami_fields.type_name`: ``A100`` matches ``NVIDIA A100-SXM4-40GB``,
    ``NVIDIA`` matches ``Tesla T4``); UUIDs match exactly. ``idle_only`` (HAMi's ``mutex``
    policy) and ``mode`` (``nvidia.com/vgpu-mode``) depend on the GPU's state: the fit
    checks them.
    """

    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    numa_bind: bool = False
    #: Only GPUs with no task on them (HAMi's ``mutex``).
    idle_only: bool = False
    #: ``nvidia.com/vgpu-mode`` as given: a GPU qualifies when it contains the GPU's mode.
    mode: str | None = None

    def type_allowed(self, model: str) -> bool:
        if not (self.use_types or self.nouse_types):
            # Most pods name no type, and this runs per GPU per scheduling attempt (8 % of
            # the scheduler's CPU in a burst, py-spy): skip lowering the model.
            return True
        lowered = hami_fields.type_name(model).lower()
        if self.use_types and not any(t.lower() in lowered for t in self.use_types):
            return False
        return not any(t.lower() in lowered for t in self.nouse_types)

    def uuid_allowed(self, uuid: str) -> bool:
        if self.use_uuids and uuid not in self.use_uuids:
            return False
        return uuid not in self.nouse_uuids

    def mode_allowed(self, mode: str) -> bool:
        return self.mode is None or hami_fields.mode_allows(self.mode, mode)

    @property
    def unrestricted(self) -> bool:
        return not (self.use_types or self.nouse_types or self.use_uuids or self.nouse_uuids
                    or self.idle_only or self.mode is not None)


@dataclass(frozen=True)
class PodChoices:
    """Everything a pod's annotations say about its placement."""

    selector: GpuSelector = GpuSelector()
    gpu_policy: str | None = None
    node_policy: str | None = None
    topology: str = TOPOLOGY_PREFERRED
    #: ``hami.io/gpu-scheduler-policy`` read as HAMi reads it, when the pod's GPU policy
    #: is HAMi's (``gpu_policy`` is then None).
    hami_gpu: HamiGpuPolicy | None = None
    #: ``hami.io/device-scoring-weights``, when given.
    weights: ScoringWeights | None = None
    #: Where vgpu reads a field otherwise than HAMi, or HAMi ignores a value: for the
    #: admission warnings.
    notes: tuple[str, ...] = ()

    @property
    def topology_required(self) -> bool:
        return self.topology == TOPOLOGY_REQUIRED


def _policy(annotations: Mapping[str, str], key: str, allowed: tuple[str, ...]) -> str | None:
    value = annotations.get(key)
    if value is None:
        return None
    name = str(value).strip()
    if name not in allowed:
        raise RequestError(
            f"annotation {key}: unknown policy {value!r}; use one of {', '.join(allowed)}")
    return name


#: Go's strconv.ParseBool, which HAMi reads ``numa-bind`` with.
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _numa_bind(annotations: Mapping[str, str], notes: list[str]) -> bool:
    """HAMi's reading: true only for what Go's ParseBool reads as true; anything else,
    even a value it cannot read, means no binding (so it is never refused)."""
    value = annotations.get(NUMA_BIND)
    if value is None:
        return False
    text = str(value)
    if text not in _GO_TRUE + _GO_FALSE:
        notes.append(f"{NUMA_BIND}: {text[:40]!r} is not a boolean HAMi reads, so no NUMA "
                     f"binding (use \"true\")")
    return text in _GO_TRUE


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
                GPU_POLICY, GPU_POLICY_HAMI, NODE_POLICY, NODE_POLICY_HAMI, GPU_TOPOLOGY,
                hami_fields.SCORING_WEIGHTS, hami_fields.VGPU_MODE)
# Most pods give none of these: one shared value instead of three objects a pod (the
# scheduler keeps one per pod in its cache).
_NO_CHOICES = PodChoices()


def gives_choices(annotations: Mapping[str, object]) -> bool:
    """Whether any annotation :func:`parse_pod_choices` reads is there."""
    return any(key in annotations for key in _CHOICE_KEYS)


def parse_pod_choices(annotations: Mapping[str, str] | None) -> PodChoices:
    """Parse a pod's selection and policy annotations; a bad one raises RequestError."""
    ann = annotations or {}
    if not gives_choices(ann):
        return _NO_CHOICES
    notes: list[str] = []
    mode = ann.get(hami_fields.VGPU_MODE)
    gpu_policy = _policy(ann, GPU_POLICY, policy.GPU_POLICIES)
    hami_gpu = None
    raw = ann.get(GPU_POLICY_HAMI)
    if gpu_policy is None and raw is not None:
        if str(raw).strip() in _VGPU_ONLY_GPU_POLICIES:
            gpu_policy = str(raw).strip()
        else:
            hami_gpu = hami_fields.parse_gpu_policy(str(raw))
    node_policy = _policy(ann, NODE_POLICY, policy.NODE_POLICIES)
    raw_node = ann.get(NODE_POLICY_HAMI)
    if node_policy is None and raw_node is not None:
        node_policy = hami_fields.parse_node_policy(str(raw_node))
        if str(raw_node) not in (hami_fields.BINPACK, hami_fields.SPREAD):
            notes.append(f"{NODE_POLICY_HAMI}: {str(raw_node)[:40]!r} is not a node policy; "
                         f"binpack, as HAMi reads it")
    raw_weights = ann.get(hami_fields.SCORING_WEIGHTS)
    weights = None if raw_weights is None else hami_fields.parse_scoring_weights(
        str(raw_weights))
    selector = GpuSelector(
        use_types=_split(str(ann.get(USE_GPUTYPE, ""))),
        nouse_types=_split(str(ann.get(NOUSE_GPUTYPE, ""))),
        use_uuids=_split(str(ann.get(USE_GPUUUID, ""))),
        nouse_uuids=_split(str(ann.get(NOUSE_GPUUUID, ""))),
        numa_bind=_numa_bind(ann, notes),
        idle_only=hami_gpu is not None and hami_gpu.mutex,
        mode=None if mode is None else str(mode),
    )
    notes.extend(hami_notes(hami_gpu, gpu_policy, weights, selector.mode))
    return PodChoices(
        selector=selector,
        gpu_policy=gpu_policy,
        node_policy=node_policy,
        topology=_topology(ann),
        hami_gpu=hami_gpu,
        weights=weights,
        notes=tuple(notes),
    )


def hami_notes(hami_gpu: HamiGpuPolicy | None, gpu_policy: str | None,
               weights: ScoringWeights | None, mode: str | None) -> list[str]:
    """The admission warnings for HAMi's policy, weights and mode annotations."""
    notes = []
    if hami_gpu is not None:
        for token in hami_gpu.ignored[:3]:
            notes.append(f"{GPU_POLICY_HAMI}: {token[:40]!r} means nothing to HAMi; ignored")
        if hami_gpu.topology:
            notes.append(f"{GPU_POLICY_HAMI}: topology-aware is vgpu's link-aware choice "
                         f"(docs/user-guide.md#multi-gpu-pods-and-gpu-links), not HAMi's "
                         f"pair scores")
    if weights is not None and gpu_policy is not None:
        notes.append(f"{hami_fields.SCORING_WEIGHTS}: weighs HAMi's binpack and spread "
                     f"scores; GPU policy {gpu_policy!r} does not read it")
    if mode is not None:
        if hami_fields.mode_allows(mode, hami_fields.MODE_MIG):
            notes.append(f"{hami_fields.VGPU_MODE}: vgpu shares no GPU in MIG mode")
        if not any(hami_fields.mode_allows(mode, m) for m in _VGPU_MODES):
            notes.append(f"{hami_fields.VGPU_MODE}: {mode[:40]!r} names no mode vgpu runs "
                         f"({', '.join(_VGPU_MODES)}): the pod waits for such a GPU")
    return notes

