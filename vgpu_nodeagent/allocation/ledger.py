"""What this node's agent has served on each of its GPUs: the last check before a container
gets a slice (issue 36).

The scheduler accounts for every slice it hands out, but a Binding that lands late, a
paused leader, a second scheduler or a forged assignment can each put two pods' slices on
one GPU past what it has. Every one of those pods still has to pass Allocate here, so the
agent keeps a ledger of the slices it served and refuses a grant that would take a GPU
past its memory, its compute or its task count, by the same arithmetic the scheduler uses
(:func:`vgpu.devices.fit`): such a pod fails, and no container ever holds a slice the GPU
does not have.

A pod's slices count from the moment one of its containers is served until the pod is
gone or has ended; the ledger learns them from three places, so that it survives restarts:
the agent's own grants (this run, and the containers its progress file says a previous run
served), and, from the pod watch, the assignment a pod's ``vgpu.io/Allocated`` condition
records (:mod:`vgpu.served`) or, for a pod an agent without that record served, its
``bind-phase: success``. That last one is annotations, which a pod's owner can write where
admission is not in the way: it counts only when the pod's containers ask for the GPUs it
names (:func:`vgpu.usage.mismatch`), so a pod that asks for none cannot block a GPU.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from vgpu import served, usage
from vgpu.annotations import PHASE_SUCCESS
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment, GrantedDevice, assignment_of
from vgpu.config import Config
from vgpu.devices import EMPTY, Device, FitReason, Usage, fit_held, memory_capacity
from vgpu.errors import CodecError, RequestError
from vgpu.init_reuse import footprint
from vgpu.pods import bind_phase, is_terminated, scheduler_name
from vgpu.requests import parse_pod
from vgpu_nodeagent.allocation.inflight_pod import InFlightPod, uid_of

#: Per container name, the slices served to it.
Grants = Mapping[str, tuple[GrantedDevice, ...]]
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Overcommit:
    """A grant refused: the GPU, what it has, what was served on it, and what was asked."""

    gpu: str
    reason: FitReason
    capacity_mib: int
    cores: int
    split: int
    used: Usage
    asked: GrantedDevice

    @property
    def message(self) -> str:
        return (f"GPU {self.gpu} cannot take a slice of {self.asked.memory_mib} MiB and "
                f"{self.asked.cores} % compute ({self.reason.value}): this node's agent has "
                f"served {self.used.memory_mib} of its {self.capacity_mib} MiB, "
                f"{self.used.cores} of {self.cores} % and {self.used.tasks} of {self.split} "
                f"tasks to other pods. The pod was placed past what the GPU has (two "
                f"schedulers, a stale leader, a late Binding or an edited assignment); the "
                f"agent refused it so that no GPU is over-committed")


class Ledger:
    """Served slices per pod; thread-safe. The config names the schedulers whose pods vgpu
    places, the memory scaling and the resource names a pod asks with."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._scaling = config.device_memory_scaling
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, tuple[GrantedDevice, ...]]] = {}
        #: Per pod, its init containers that end before its app containers: what they
        #: were served counts by the largest on each GPU, not added (vgpu.init_reuse).
        self._before: dict[str, frozenset[str]] = {}

    # -- what was served -------------------------------------------------------------------

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Pod informer handler: a pod gone or ended frees its slices; one with a served
        record (or, from an agent before that record, ``bind-phase: success``) holds them."""
        with self._lock:
            if old is not None and (new is None or uid_of(old) != uid_of(new)):
                self._forget(uid_of(old))
            if new is None:
                return
            uid = uid_of(new)
            if is_terminated(new):
                self._forget(uid)
                return
            recorded = _recorded(new, self._config)
            if recorded is not None:
                self._pods[uid] = {**self._pods.get(uid, {}), **recorded.containers}
                self._before[uid] = recorded.before_apps

    def _forget(self, uid: str) -> None:
        self._pods.pop(uid, None)
        self._before.pop(uid, None)

    def restore(self, pods: Iterable[InFlightPod]) -> None:
        """The containers the in-flight index says were served (a previous run's progress
        included) count too."""
        with self._lock:
            for pod in pods:
                if pod.assignment is None or not pod.done:
                    continue
                held = self._pods.setdefault(pod.uid, {})
                self._before[pod.uid] = pod.assignment.before_apps
                for name in pod.done:
                    if name in pod.assignment.containers:
                        held[name] = pod.assignment.containers[name]

    def served(self) -> dict[str, Usage]:
        """What is served on each GPU, by uuid."""
        with self._lock:
            return self._held(lambda uid: True)

    def _held(self, which: Callable[[str], bool]) -> dict[str, Usage]:
        """What the pods ``which`` picks hold on each GPU."""
        out: dict[str, Usage] = {}
        for uid, grants in self._pods.items():
            if which(uid):
                for gpu, held in footprint(grants, self._before.get(uid, _NONE)).items():
                    out[gpu] = out.get(gpu, EMPTY).plus(held)
        return out

    # -- the check -------------------------------------------------------------------------

    def admit(self, uid: str, grants: Grants, devices: Mapping[str, Device],
              before_apps: frozenset[str] = frozenset()) -> Overcommit | None:
        """Record ``grants`` for the pod ``uid`` if every GPU can take them on top of what
        the ledger holds (its own earlier grants aside); else record nothing and say which
        GPU cannot. ``before_apps``: the pod's init containers that end before its app
        containers (their grants count by the largest on a GPU)."""
        with self._lock:
            mine = {**self._pods.get(uid, {}), **grants}
            others = self._held(lambda other: other != uid)
            held = footprint(mine, before_apps)
            for gs in grants.values():
                for g in gs:
                    device = devices.get(g.uuid)
                    if device is None:
                        continue  # not this node's GPU: the request was refused before
                    # Capacity only: health is what the kubelet's device list says.
                    whole = dataclasses.replace(device, healthy=True, cordoned=False)
                    before = others.get(g.uuid, EMPTY)
                    reason = fit_held(whole, before, held[g.uuid], self._scaling)
                    if reason is not None:
                        return Overcommit(g.uuid, reason,
                                          memory_capacity(device, self._scaling),
                                          device.cores, device.split, before, g)
            self._pods[uid] = mine
            self._before[uid] = before_apps
            return None


def _recorded(pod: Obj, config: Config) -> Assignment | None:
    """The slices a pod holds by the agent's own record: its served condition, else (a
    pod an older agent served) its assignment once ``bind-phase: success``, where its
    containers ask for what it names."""
    if scheduler_name(pod) not in config.vgpu_schedulers:
        return None
    try:
        recorded = served.served(pod)
        if recorded is not None:
            return recorded
        if bind_phase(pod) != PHASE_SUCCESS:
            return None
        annotated = assignment_of(pod)
        if annotated is None or usage.mismatch(annotated, parse_pod(pod, config)):
            return None
        return annotated
    except (CodecError, RequestError):
        return None
