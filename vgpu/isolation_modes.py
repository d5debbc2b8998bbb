"""Isolation backends: what holds a container to its slice, and who may rely on it.

A node runs one backend (docs/isolation.md#backends): ``none`` (the slice is bookkeeping only),
``hami-core`` (HAMi-core's environment; enforced only when the agent preloads its library)
or ``mps`` (NVIDIA MPS per-client limits through the agent's control daemon). The cluster
config names the default; the node label ``vgpu.io/isolation`` overrides it per node. The
node agent reports the mode each GPU *actually* runs in (its inventory), which may fall
back from the configured one, e.g. while the MPS daemon is down. ``mps-hami-core`` is MPS
with HAMi-core's memory hooks preloaded beside it: MPS holds memory and compute, and CUDA
reports the container's grant as the GPU's total memory, which frameworks size their pools
from (under MPS alone CUDA reports the whole GPU). Its name has no ``+``: a label value
cannot carry one.

Pure: parsing and decisions only. The scheduler's ``IsolationRequired`` plugin and the
node agent both use :func:`resolve_mode` and :func:`enforcing`, so they agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from vgpu.errors import RequestError

NONE = "none"
HAMI_CORE = "hami-core"
MPS = "mps"
MPS_HAMI_CORE = "mps-hami-core"
MODES = (NONE, HAMI_CORE, MPS, MPS_HAMI_CORE)
#: The modes whose containers are clients of the node's MPS control daemon.
MPS_MODES = frozenset({MPS, MPS_HAMI_CORE})
#: What a GPU of an inventory written before modes were reported (version 1) runs.
UNKNOWN = "unknown"
#: A configured mode only: the node agent runs the strongest mode the node supports
#: (:func:`strongest`) and reports that.
AUTO = "auto"
#: What ``isolation.mode`` and the node label may name.
CONFIGURABLE = (*MODES, AUTO)

#: Node label naming the node's backend, overriding ``isolation.mode``.
NODE_LABEL = "vgpu.io/isolation"
#: Pod annotation: "true" keeps a fractional pod off GPUs whose mode does not enforce.
REQUIRE_ANNOTATION = "vgpu.io/require-isolation"
#: Pod annotation the node agent writes with the mode the pod's containers got.
POD_ANNOTATION = "vgpu.io/isolation"

#: Volta MPS serves at most 48 client CUDA contexts per GPU (NVIDIA's MPS guide).
MPS_MAX_CLIENTS = 48


@dataclass(frozen=True)
class ModeChoice:
    """The backend a node should run, and why not the one it was told when that failed."""

    mode: str
    error: str | None = None


def resolve_mode(default: str, label: str | None) -> ModeChoice:
    """The node's configured mode: its label when that names a mode, else the default.

    An unknown label value is an operator's typo; the node keeps the cluster default (a
    working backend beats none) and the error says what to fix.
    """
    if label is None:
        return ModeChoice(default)
    value = label.strip()
    if value in CONFIGURABLE:
        return ModeChoice(value)
    return ModeChoice(default, f"node label {NODE_LABEL}={label!r} is not an isolation mode "
                               f"(use one of {', '.join(CONFIGURABLE)}); running the cluster "
                               f"default {default!r}")


def configured(default: str, label: str | None, target: str | None) -> str:
    """The mode a node is configured for, as the scheduler and ``vgpu inspect`` read it: its
    label, else ``default``; for ``auto``, the mode its agent chose (``target``, from its
    inventory), else ``auto`` itself, which every reader takes as "may run any mode"."""
    mode = resolve_mode(default, label).mode
    if mode == AUTO and target in MODES:
        return str(target)
    return mode


@dataclass(frozen=True)
class Holds:
    """What a mode holds a container to, as measured (docs/isolation.md#measurements)."""

    memory: bool
    compute: bool
    #: A pod's GPU fault stays its own (:mod:`vgpu.fault_domains`).
    faults_apart: bool
    #: The GPU serves one Linux uid at a time (:mod:`vgpu.mps_users`).
    one_user: bool = False


#: Per mode a node can run: ``hami-core`` held memory but not compute on an H100 with CUDA
#: 13; MPS held both, with one fault domain and one user per GPU.
HOLDS: Mapping[str, Holds] = {
    NONE: Holds(memory=False, compute=False, faults_apart=False),
    HAMI_CORE: Holds(memory=True, compute=False, faults_apart=True),
    MPS: Holds(memory=True, compute=True, faults_apart=False, one_user=True),
    MPS_HAMI_CORE: Holds(memory=True, compute=True, faults_apart=False, one_user=True),
}
#: What a mode this vgpu does not know holds: nothing, read the safe way. (Its agent
#: predates MPS, so it serves any user: :func:`vgpu.mps_users.on_mps`.)
HOLDS_UNKNOWN = Holds(memory=False, compute=False, faults_apart=False)


def holds(mode: str) -> Holds:
    return HOLDS.get(mode, HOLDS_UNKNOWN)


def summary(modes: Iterable[str]) -> str:
    """What GPUs in ``modes`` hold, in words: a node's line in ``vgpu inspect``. GPUs of
    several modes (a node whose MPS daemon came back while some GPU lagged) hold only what
    all of them hold."""
    listed = sorted(set(modes))
    if not listed:
        return "no GPUs"
    each = [holds(m) for m in listed]
    memory = all(h.memory for h in each)
    compute = all(h.compute for h in each)
    apart = all(h.faults_apart for h in each)
    one_user = any(h.one_user for h in each)
    parts = [f"memory {'held' if memory else 'not held'}",
             f"compute {'held' if compute else 'not held'}",
             "faults kept to each pod" if apart else "a GPU is one fault domain"]
    if one_user:
        parts.append("one uid per GPU (MPS)")
    return ", ".join(parts)


def strongest(mps: bool, library: bool) -> str:
    """The mode ``auto`` runs: MPS where the node can run it (it holds compute too), with
    HAMi-core's memory report where its library checked out; HAMi-core alone; else none."""
    if mps:
        return MPS_HAMI_CORE if library else MPS
    return HAMI_CORE if library else NONE


def uses_mps(mode: str) -> bool:
    """Whether containers of a GPU in ``mode`` are clients of the MPS control daemon."""
    return mode in MPS_MODES


def enforcing(mode: str, modes: Collection[str]) -> bool:
    """Whether a GPU in ``mode`` holds containers to their slices, by the cluster's list."""
    return mode in modes


def required(annotations: Mapping[str, str] | None, default: bool) -> bool:
    """Whether a pod requires enforced isolation (its annotation, else the cluster default)."""
    value = (annotations or {}).get(REQUIRE_ANNOTATION)
    if value is None:
        return default
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise RequestError(f"annotation {REQUIRE_ANNOTATION}: {value!r} is not a boolean; use "
                       f"\"true\" or \"false\"")


def fits(need: bool, modes: Iterable[str], enforcing_modes: Collection[str]) -> bool:
    """A node holds a pod that needs enforcement only when every healthy GPU it reports
    enforces: the GPU choice comes later, and a node runs one backend anyway."""
    if not need:
        return True
    listed = list(modes)
    return bool(listed) and all(enforcing(m, enforcing_modes) for m in listed)
