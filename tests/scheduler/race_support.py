"""The race harness's world: an in-memory cluster whose watch lags as the harness says,
bindings that run when the harness says, and the invariants checked after every step.

The scheduler under test is the real one, on the in-memory cluster, through the cluster
port; only the order of things is the harness's: which watch events have reached the
scheduler's informers, which of its queued bindings has gone out, what the other actors
(a second binder, the node agent, the kubelet, a StatefulSet controller) did meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import vgpu.annotations as ann
from vgpu import codecs, meta, usage
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import ALL, Kind, Obj, Selector, WatchEvent
from vgpu.codecs import Assignment, GrantedDevice
from vgpu.config import Config
from vgpu.devices import Device, Usage, fit
from vgpu.errors import ClusterError, CodecError, InvalidError, OutcomeUnknownError
from vgpu.pods import is_terminated, node_name, pod_id
from vgpu_scheduler.host.scheduler import Scheduler

#: What a failed Binding did on the server: nothing (HTTP 422), or it bound the pod and
#: then the answer was lost (the connection ended before it: the transport's
#: OutcomeUnknownError), or the answer was lost and the Binding lands later, when the
#: harness says, if the pod can still take it (issue 36: a proxy holding the request).
REFUSED, LOST, LATE = "refused", "lost", "late"


@dataclass
class LateBinding:
    namespace: str
    name: str
    node: str
    annotations: Mapping[str, str]
    uid: str
    sent: float


class LaggingCluster(MemoryCluster):
    """The in-memory cluster, with a watch that hands out only the events the harness
    released, a kubelet that takes a while to stop a bound pod's containers, and bindings
    that fail once when told to."""

    def __init__(self) -> None:
        super().__init__()
        #: Events of each kind the scheduler's next watches may still receive; None: all.
        self.allowance: dict[str, int | None] = {"pods": 0, "nodes": 0}
        self.fail_next_bind: str | None = None
        #: Bindings sent whose answer was lost and that have not landed yet.
        self.late: list[LateBinding] = []
        self.now: Callable[[], float] = lambda: 0.0

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        events = super().watch(kind, resource_version, selector, 0.0)
        if self.allowance.get(kind) is None:
            return events
        return self._limited(kind, events)

    def _limited(self, kind: str, events: Iterator[WatchEvent]) -> Iterator[WatchEvent]:
        for event in events:
            left = self.allowance[kind]
            if left is not None and left <= 0:
                return
            if left is not None:
                self.allowance[kind] = left - 1
            yield event

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        # A bound pod is only marked while its containers stop (the kubelet confirms).
        if kind == "pods":
            obj = self.get("pods", name, namespace)
            if node_name(obj) and not meta.deleting(obj):
                obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
                self.replace("pods", obj)
                return
        super().delete(kind, name, namespace)

    def remove(self, name: str) -> None:
        """The kubelet confirms a terminating pod is gone (or a pending one is deleted)."""
        super().delete("pods", name, "default")

    def bind(self, namespace: str, name: str, node: str, annotations: Mapping[str, str], *,
             uid: str = "") -> None:
        failure, self.fail_next_bind = self.fail_next_bind, None
        if failure == REFUSED:
            raise InvalidError(f"bind pod {name}: the API server said no (HTTP 422)")
        if failure == LATE:
            self.late.append(LateBinding(namespace, name, node, dict(annotations), uid,
                                         self.now()))
            raise OutcomeUnknownError(f"bind pod {name}: the connection ended before the "
                                      f"answer")
        self._bind(namespace, name, node, annotations, uid)
        if failure == LOST:
            raise OutcomeUnknownError(f"bind pod {name}: the connection ended before the "
                                      f"answer")

    def _bind(self, namespace: str, name: str, node: str, annotations: Mapping[str, str],
              uid: str) -> None:
        super().bind(namespace, name, node, annotations, uid=uid)

    def land(self, index: int, deadline: float) -> str:
        """The late Binding at ``index`` reaches the API server, if it still can (sent
        less than ``deadline`` seconds ago: past the transport's timeout it never lands)."""
        late = self.late.pop(index % len(self.late))
        if self.now() - late.sent > deadline:
            return f"late binding of {late.name} never lands"
        try:
            self._bind(late.namespace, late.name, late.node, late.annotations, late.uid)
        except ClusterError as exc:  # bound since, or gone: the server refuses it
            return f"late binding of {late.name} refused: {exc}"
        return f"late binding of {late.name} lands on {late.node}"

    def pods(self) -> list[Obj]:
        return self.list("pods").items


class QueuedBinder:
    """Binding cycles wait here until the harness runs them, in the order it picks."""

    def __init__(self) -> None:
        self.tasks: list[Callable[[], None]] = []

    def submit(self, task: Callable[[], None]) -> None:
        self.tasks.append(task)

    def run(self, index: int) -> bool:
        if not self.tasks:
            return False
        self.tasks.pop(index % len(self.tasks))()
        return True

    def close(self, cancel: bool = False) -> None:
        self.tasks.clear()


# -- what the cluster holds ----------------------------------------------------------------


def claimed_usage(pods: list[Obj]) -> dict[str, Usage]:
    """Per GPU, what the pods bound and not ended hold by their assignments."""
    assignments = []
    for pod in pods:
        try:
            found = usage.claimed(pod, Config().vgpu_schedulers)
        except CodecError:
            continue
        if found is not None:
            assignments.append(found)
    return usage.tally(assignments)


def over(device: Device, used: Usage) -> str | None:
    """How ``used`` exceeds the GPU, or None."""
    if used.memory_mib > device.memory_mib:
        return f"{used.memory_mib} MiB of {device.memory_mib}"
    if used.cores > device.cores:
        return f"{used.cores} % of compute"
    if used.tasks > device.split:
        return f"{used.tasks} tasks of {device.split}"
    return None


def one_slice(device: Device, pod: Obj, memory: int, cores: int) -> Assignment:
    container = pod["spec"]["containers"][0]["name"]
    return Assignment(device.uuid.split("-")[1],
                      {container: (GrantedDevice(device.uuid, memory, cores),)})


def free_gpu(gpus: Mapping[str, tuple[Device, ...]], views: list[Mapping[str, Usage]],
             memory: int, cores: int) -> Device | None:
    """A GPU where a slice of ``memory`` and ``cores`` fits in every one of ``views``."""
    for devices in gpus.values():
        for device in devices:
            if all(fit(device, view.get(device.uuid, Usage()), memory, cores, 1.0) is None
                   for view in views):
                return device
    return None


def bind_annotations(assignment: Assignment) -> dict[str, str]:
    return {ann.ASSIGNMENT: codecs.encode_assignment(assignment),
            ann.BIND_PHASE: ann.PHASE_ALLOCATING,
            ann.BIND_TIME: "2030-01-01T00:00:00Z"}


# -- what the scheduler holds --------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """The scheduler's cache, node by node: usage per GPU; what it hands out, bound and
    assumed pods that are not leaving (a nomination holds room on top of the victims it
    evicted, whose deletion the watch may not have shown yet); and the pods counted
    where."""

    usages: dict[str, Usage]
    staying: dict[str, Usage]
    pods: dict[str, str]


def cache_view(sched: Scheduler) -> View:
    """Every node's NodeInfo, checked against its own pods: a GPU's usage is what the
    pods the node lists claim, and no pod is listed on two nodes."""
    usages: dict[str, Usage] = {}
    staying: list[Assignment] = []
    where: dict[str, str] = {}
    for name in sched.cache.node_names():
        info = sched.cache.node_info(name)
        if info is None:
            continue
        listed = [p.assignment for p in info.pods.values() if p.assignment is not None]
        expected = usage.tally(listed)
        actual = {u: v for u, v in info.gpu_usage.items() if v != Usage()}
        assert actual == expected, (
            f"node {name}: GPU usage {actual} is not what its pods claim {expected}")
        for key in info.pods:
            assert key not in where, f"pod {key} is counted on {where[key]} and {name}"
            where[key] = name
        usages.update(info.gpu_usage)
        staying.extend(p.assignment for p in info.pods.values()
                       if p.assignment is not None and not p.info.terminating
                       and not p.nominated)
    return View(usages, usage.tally(staying), where)


def watched_pods(sched: Scheduler) -> list[Obj]:
    """The pods as the scheduler's watch last showed them."""
    return sched.informers()[1].items()


def check_watched_counted(sched: Scheduler, view: View) -> None:
    """Every pod the watch showed bound, not ended, is counted on its node, as bound."""
    known = set(sched.cache.node_names())
    for pod in watched_pods(sched):
        node = node_name(pod)
        if node is None or is_terminated(pod) or node not in known:
            continue
        key = pod_id(pod)
        rec = sched.cache.pod(key)
        assert rec is not None, f"pod {key} is bound to {node} but not in the cache"
        assert rec.node == node and not rec.assumed and not rec.nominated, (
            f"pod {key} is bound to {node}; the cache has {rec}")
        assert view.pods.get(key) == node, (
            f"pod {key} is bound to {node} but counted on {view.pods.get(key)}")
