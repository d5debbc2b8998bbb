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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vgpu import served, usage
from vgpu.annotations import PHASE_SUCCESS
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment, GrantedDevice, assignment_of
from vgpu.config import Config
from vgpu.devices import EMPTY, Device, FitReason, Usage, fit, memory_capacity
from vgpu.errors import CodecError, RequestError
from vgpu.pods import bind_phase, is_terminated, scheduler_name
from vgpu.requests import parse_pod
from vgpu_nodeagent.allocation.inflight_pod import InFlightPod, uid_of

#: Per container name, the slices served to it.
Grants = Mapping[str, tuple[GrantedDevice, ...]]


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

    # -- what was served -------------------------------------------------------------------

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Pod informer handler: a pod gone or ended frees its slices; one with a served
        record (or, from an agent before that record, ``bind-phase: success``) holds them."""
        with self._lock:
            if old is not None and (new is None or uid_of(old) != uid_of(new)):
                self._pods.pop(uid_of(old), None)
            if new is None:
                return
            uid = uid_of(new)
            if is_terminated(new):
                self._pods.pop(uid, None)
                return
            recorded = _recorded(new, self._config)
            if recorded is not None:
                self._pods[uid] = {**self._pods.get(uid, {}), **recorded.containers}

    def restore(self, pods: Iterable[InFlightPod]) -> None:
        """The containers the in-flight index says were served (a previous run's progress
        included) count too."""
        with self._lock:
            for pod in pods:
                if pod.assignment is None or not pod.done:
                    continue
                held = self._pods.setdefault(pod.uid, {})
                for name in pod.done:
                    if name in pod.assignment.containers:
                        held[name] = pod.assignment.containers[name]

    def served(self) -> dict[str, Usage]:
        """What is served on each GPU, by uuid."""
        with self._lock:
            return _tally(g for grants in self._pods.values() for gs in grants.values()
                          for g in gs)

    # -- the check -------------------------------------------------------------------------

    def admit(self, uid: str, grants: Grants, devices: Mapping[str, Device],
              ) -> Overcommit | None:
        """Record ``grants`` for the pod ``uid`` if every GPU can take them on top of what
        the ledger holds (its own earlier grants aside); else record nothing and say which
        GPU cannot."""
        with self._lock:
            mine = self._pods.get(uid, {})
            others = _tally(g for other, held in self._pods.items() if other != uid
                            for gs in held.values() for g in gs)
            used = _tally(g for name, gs in mine.items() if name not in grants for g in gs)
            for uuid, usage in others.items():
                used[uuid] = _add(used.get(uuid, EMPTY), usage)
            for gs in grants.values():
                for g in gs:
                    device = devices.get(g.uuid)
                    if device is None:
                        continue  # not this node's GPU: the request was refused before
                    # Capacity only: health is what the kubelet's device list says.
                    whole = dataclasses.replace(device, healthy=True)
                    before = used.get(g.uuid, EMPTY)
                    reason = fit(whole, before, g.memory_mib, g.cores, self._scaling)
                    if reason is not None:
                        return Overcommit(g.uuid, reason,
                                          memory_capacity(device, self._scaling),
                                          device.cores, device.split, before, g)
                    used[g.uuid] = before.add(g.memory_mib, g.cores)
            self._pods[uid] = {**mine, **grants}
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


def _tally(grants: Iterable[GrantedDevice]) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for g in grants:
        out[g.uuid] = out.get(g.uuid, EMPTY).add(g.memory_mib, g.cores)
    return out


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(a.memory_mib + b.memory_mib, a.cores + b.cores, a.tasks + b.tasks)
