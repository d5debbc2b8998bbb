"""HAMi's pod-level fields, read with HAMi's meaning (docs/hami-migration.md).

HAMi is the reference for the annotations it defines, as kube-scheduler is for its rules:
a value HAMi accepts is accepted here with the meaning HAMi gives it, and where vgpu does
something else the parse says so in a note, which the webhook returns as an admission
warning. Pure: the webhook and the scheduler read a pod the same way.

- ``hami.io/gpu-scheduler-policy``: one name or a comma chain. ``binpack``, ``spread``
  and ``numa`` are sort keys applied in the order written; ``mutex`` (only idle GPUs) and
  ``topology-aware`` are filters. Any other token is ignored, as HAMi ignores it; a chain
  with no sort key sorts as ``spread``, HAMi's default.
- ``hami.io/node-scheduler-policy``: HAMi's ``spread``, else HAMi's ``binpack`` (its
  fallback): vgpu's ``hami-spread`` and ``hami-binpack``, HAMi's node score.
- ``hami.io/device-scoring-weights``: ``slot=1,core=1,memory=3``; refused as HAMi refuses.
- ``nvidia.com/vgpu-mode``: a GPU qualifies when the value contains its isolation mode.
- GPU type names: HAMi names a GPU ``NVIDIA-`` + the driver's name when that name does not
  start with ``NVIDIA``; ``use-gputype`` and ``nouse-gputype`` match against that name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from vgpu.errors import RequestError
from vgpu.policy import HAMI_NODE_BINPACK, HAMI_NODE_SPREAD

GPU_POLICY_HAMI = "hami.io/gpu-scheduler-policy"
NODE_POLICY_HAMI = "hami.io/node-scheduler-policy"
SCORING_WEIGHTS = "hami.io/device-scoring-weights"
VGPU_MODE = "nvidia.com/vgpu-mode"
#: On a Node: GPU UUIDs that take no new slices (HAMi's live per-GPU cordon).
DEVICE_CORDON = "hami.io/device-cordon"

BINPACK = "binpack"
SPREAD = "spread"
NUMA = "numa"
MUTEX = "mutex"
TOPOLOGY_AWARE = "topology-aware"
#: The tokens that order GPUs, in HAMi's order of recognition.
SORT_KEYS = (BINPACK, SPREAD, NUMA)
#: Every token HAMi gives a meaning.
TOKENS = (*SORT_KEYS, MUTEX, TOPOLOGY_AWARE)
#: HAMi's isolation modes; vgpu shares no GPU in ``mig`` mode (it leaves MIG GPUs out).
MODE_MIG = "mig"
MODES = ("hami-core", "mps", MODE_MIG)

#: The prefix HAMi's device plugin gives a GPU whose driver name lacks it.
TYPE_PREFIX = "NVIDIA"


def type_name(model: str) -> str:
    """The GPU's type as HAMi names it: the driver's name, with ``NVIDIA-`` in front when
    it does not start with ``NVIDIA`` (``Tesla T4`` is ``NVIDIA-Tesla T4``)."""
    return model if model.startswith(TYPE_PREFIX) else f"{TYPE_PREFIX}-{model}"


def _tokens(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(","))


@dataclass(frozen=True)
class HamiGpuPolicy:
    """A ``hami.io/gpu-scheduler-policy`` value as HAMi reads it."""

    raw: str
    #: The sort keys, in the order written, each once.
    keys: tuple[str, ...]
    #: Only GPUs with no task on them.
    mutex: bool
    #: HAMi's topology-aware choice; vgpu's link-aware choice plays its part.
    topology: bool
    #: Tokens HAMi gives no meaning (it ignores them).
    ignored: tuple[str, ...]

    @property
    def chained(self) -> bool:
        """HAMi sorts a comma list, or a bare ``numa``, by the chain of its keys (with the
        GPU index as the last tie-break); a single name by its own rule."""
        return "," in self.raw or self.raw == NUMA

    @property
    def single(self) -> str:
        """The single name HAMi's sort switches on (``spread`` for anything it does not
        know), for a policy that is not :attr:`chained`."""
        return self.raw if self.raw in (BINPACK, MUTEX) else SPREAD


def parse_gpu_policy(value: str) -> HamiGpuPolicy:
    """Read a ``hami.io/gpu-scheduler-policy`` value; never refuses (HAMi does not)."""
    tokens = _tokens(value)
    keys: list[str] = []
    for token in tokens:
        if token in SORT_KEYS and token not in keys:
            keys.append(token)
    ignored = tuple(t for t in tokens if t and t not in TOKENS)
    return HamiGpuPolicy(raw=value, keys=tuple(keys), mutex=MUTEX in tokens,
                         topology=TOPOLOGY_AWARE in tokens, ignored=ignored)


def parse_node_policy(value: str) -> str:
    """HAMi's node policy, by vgpu's name for it: HAMi's ``spread`` for exactly
    ``spread``, HAMi's ``binpack`` for every other value (HAMi compares the raw value)."""
    return HAMI_NODE_SPREAD if value == SPREAD else HAMI_NODE_BINPACK


@dataclass(frozen=True)
class ScoringWeights:
    """How much each dimension weighs in HAMi's per-GPU score."""

    slot: int = 1
    core: int = 1
    memory: int = 1


DEFAULT_WEIGHTS = ScoringWeights()
_WEIGHT_KEYS = ("slot", "core", "memory")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_scoring_weights(value: str) -> ScoringWeights:
    """Read ``hami.io/device-scoring-weights`` (``slot=1,core=1,memory=3``), refusing
    what HAMi refuses: not exactly the three keys, a duplicate, a weight that is not a
    whole number or is negative, or all three zero."""
    where = f"annotation {SCORING_WEIGHTS}: {value!r}"
    parts = value.split(",")
    if len(parts) != len(_WEIGHT_KEYS):
        raise RequestError(f"{where}: give the slot, core and memory weights "
                           f"(slot=1,core=1,memory=3)")
    weights: dict[str, int] = {}
    for part in parts:
        key, sep, raw = part.strip().partition("=")
        key = key.strip()
        if not sep:
            raise RequestError(f"{where}: expected key=value entries")
        if key in weights:
            raise RequestError(f"{where}: {key!r} is given twice")
        number = raw.strip()
        # Go's ParseInt(s, 10, 64): an optional sign and digits, nothing else, in range.
        if not _INTEGER.fullmatch(number) or not -2 ** 63 <= int(number) < 2 ** 63:
            raise RequestError(f"{where}: the {key!r} weight must be a whole number")
        weight = int(number)
        if weight < 0:
            raise RequestError(f"{where}: the {key!r} weight must not be negative")
        if key not in _WEIGHT_KEYS:
            raise RequestError(f"{where}: unknown weight {key!r}; use slot, core and memory")
        weights[key] = weight
    if not any(weights.values()):
        raise RequestError(f"{where}: at least one weight must be above 0")
    return ScoringWeights(**weights)


def mode_allows(value: str, mode: str) -> bool:
    """Whether a GPU running isolation ``mode`` qualifies for a pod whose
    ``nvidia.com/vgpu-mode`` is ``value``: HAMi's test, the value contains the mode."""
    return mode in value


def cordoned(annotations: Mapping[str, object]) -> frozenset[str]:
    """The GPU UUIDs a node's ``hami.io/device-cordon`` names (comma list, trimmed, empty
    entries skipped, as HAMi reads it); a GPU there keeps its pods and takes no new one."""
    raw = annotations.get(DEVICE_CORDON)
    if not isinstance(raw, str):
        return frozenset()
    return frozenset(u.strip() for u in raw.split(",") if u.strip())
