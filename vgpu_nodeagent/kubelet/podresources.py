"""The kubelet's own account of which container got which devices, checked against the
assignments.

The kubelet serves the pod-resources API (v1 ``List``; the only method in 1.20) on
``<kubelet root>/pod-resources/kubelet.sock``: for every pod it runs, each container's
device IDs per resource. Ours are virtual IDs (``<uuid>-<slot>``), so the GPUs a container
holds in the kubelet's books can be compared with the GPUs the scheduler assigned it.
Allocate carries device IDs but no pod, and the agent matches a request to a container by
its device count; a container that ends up on GPUs it was not assigned shows here.

The same view names intruders: pods that hold device IDs of our resource in the kubelet's
books but that no vgpu scheduler placed (a pod created on the node, or naming another
scheduler, admitted while the webhook was down). Allocate refuses such a pod when it can
tell (:mod:`vgpu_nodeagent.allocation.inflight`); one that got devices anyway shows here.

Pure: :func:`from_response` (protobuf -> values), :func:`mismatches` and :func:`intruders`;
I/O: the thin :class:`PodResourcesClient` and :class:`PodResourcesWatch`, the agent's loop
that keeps the latest view for the metrics and reports each new finding once.

A ``List`` must not meet an admission. Kubelets before kubernetes/kubernetes#119561
(v1.20 among them) release their device-manager lock while they call the plugin's
GetPreferredAllocation; a ``List`` in that gap recomputes the allocated devices, and when
no running pod holds the resource any more the kubelet then panics ("assignment to entry
in nil map" in ``devicesToAllocate``; seen in tests/e2e/test_real_node.py). So the watch
skips its round while the agent is admitting a pod (see ``quiet`` below).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import grpc

from vgpu import logs, loops, meta
from vgpu.annotations import PHASE_SUCCESS
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment
from vgpu.errors import CodecError
from vgpu.pods import bind_phase
from vgpu.usage import claimed
from vgpu_nodeagent.devices import virtual
from vgpu_nodeagent.proto import podresources_pb2, podresources_pb2_grpc

_log = logs.get("vgpu.nodeagent.podresources")


@dataclass(frozen=True)
class KubeletDevices:
    """One container as the kubelet lists it: the device IDs of our resource it holds."""

    namespace: str
    pod: str
    container: str
    device_ids: tuple[str, ...]

    def gpus(self, known: Collection[str]) -> tuple[str, ...]:
        """The GPU behind each device ID, sorted; an ID that is not ours stays as it is."""
        return tuple(sorted(virtual.physical_uuid(i, known) or i for i in self.device_ids))


@dataclass(frozen=True)
class Mismatch:
    namespace: str
    pod: str
    container: str
    #: One GPU uuid per device ID the kubelet gave the container.
    kubelet: tuple[str, ...]
    #: One GPU uuid per slice of the container's assignment.
    assigned: tuple[str, ...]

    @property
    def message(self) -> str:
        return (f"container {self.container}: the kubelet gave it GPUs "
                f"[{', '.join(self.kubelet) or 'none'}] but it was assigned "
                f"[{', '.join(self.assigned) or 'none'}]")


@dataclass(frozen=True)
class Intruder:
    """A pod that holds our device IDs in the kubelet's books without vgpu's placement."""

    namespace: str
    pod: str
    #: Its containers holding our device IDs, and one GPU uuid per ID.
    containers: tuple[tuple[str, tuple[str, ...]], ...]
    #: The pod the watch showed: an eviction or a warning is for it alone, never for a
    #: pod that took its name since (issue 36, case 4).
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def message(self) -> str:
        held = "; ".join(f"container {name}: GPUs [{', '.join(gpus)}]"
                         for name, gpus in self.containers)
        return (f"holds vGPU devices of this node that no vgpu scheduler assigned it ({held}): "
                f"it was not placed by a vgpu scheduler, so no slice was accounted for it; "
                f"delete it and create it without spec.nodeName or spec.schedulerName")


def from_response(response: podresources_pb2.ListPodResourcesResponse,
                  resource: str) -> tuple[KubeletDevices, ...]:
    """Every container the kubelet lists, with its device IDs of ``resource`` (maybe none)."""
    out = []
    for pod in response.pod_resources:
        for container in pod.containers:
            ids = sorted(i for d in container.devices if d.resource_name == resource
                         for i in d.device_ids)
            out.append(KubeletDevices(pod.namespace, pod.name, container.name, tuple(ids)))
    return tuple(out)


def mismatches(view: Sequence[KubeletDevices], pods: Sequence[Obj],
               known: Collection[str], schedulers: Collection[str]) -> tuple[Mismatch, ...]:
    """Containers whose GPUs in the kubelet's view differ from their assignment.

    Only pods both sides know as allocated are compared. The kubelet lists a pod before
    it calls Allocate for it and frees its devices once its containers stopped, while the
    agent's watch sees ``bind-phase: success`` only after Allocate and the deletion only
    after it began: a pod in allocation or being deleted, one the kubelet does not list,
    or one the watch has not seen is no evidence.
    """
    listed = {(d.namespace, d.pod): d for d in view}
    by_container = {(d.namespace, d.pod, d.container): d for d in view}
    out = []
    for pod in pods:
        namespace, name = meta.namespace(pod, "default"), meta.name(pod)
        if (namespace, name) not in listed or bind_phase(pod) != PHASE_SUCCESS \
                or meta.deleting(pod):
            continue
        try:
            assignment = claimed(pod, schedulers)
        except CodecError:
            continue
        if assignment is None:
            continue  # not vgpu's pod: an intruder, if it holds any of our devices
        out.extend(_pod_mismatches(namespace, name, assignment, by_container, known))
    return tuple(out)


def _pod_mismatches(namespace: str, name: str, assignment: Assignment,
                    by_container: Mapping[tuple[str, str, str], KubeletDevices],
                    known: Collection[str]) -> list[Mismatch]:
    assigned = assignment.containers
    containers = set(assigned) | {c for (ns, p, c), d in by_container.items()
                                  if (ns, p) == (namespace, name) and d.device_ids}
    lent = frozenset(s.uuid for n in assignment.before_apps for s in assigned[n])
    out = []
    for container in sorted(containers):
        entry = by_container.get((namespace, name, container))
        if entry is None and container in assignment.before_apps:
            continue  # an init container: 1.20's List has none, newer ones once ended
        kubelet = entry.gpus(known) if entry is not None else ()
        wanted = tuple(sorted(s.uuid for s in assigned.get(container, ())))
        if kubelet != wanted and not _reused(kubelet, wanted, lent):
            out.append(Mismatch(namespace, name, container, kubelet, wanted))
    return out


def _reused(kubelet: tuple[str, ...], wanted: tuple[str, ...], lent: frozenset[str]) -> bool:
    """Whether the kubelet's GPUs for an app container are its assigned ones but for IDs
    it reused from the pod's init containers: the device manager hands an init
    container's devices to the first app container that asks, so their GPUs show there
    (the assignment, not the IDs, decides what the container gets)."""
    return bool(lent) and len(kubelet) == len(wanted) and set(kubelet) <= set(wanted) | lent


def intruders(view: Sequence[KubeletDevices], pods: Sequence[Obj], known: Collection[str],
              schedulers: Collection[str]) -> tuple[Intruder, ...]:
    """Pods of the local watch that hold device IDs of our resource in the kubelet's view
    but hold no vgpu assignment (:func:`vgpu.usage.claimed`): placed by no vgpu scheduler,
    or bound without an assignment. A pod being deleted is left out (it is going), and so
    is one the watch has not shown (no evidence of what it is)."""
    held: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = {}
    for entry in view:
        if entry.device_ids:
            held.setdefault((entry.namespace, entry.pod), []).append(
                (entry.container, entry.gpus(known)))
    out = []
    for pod in pods:
        namespace, name = meta.namespace(pod, "default"), meta.name(pod)
        containers = held.get((namespace, name))
        if not containers or meta.deleting(pod):
            continue
        try:
            if claimed(pod, schedulers) is not None:
                continue
        except CodecError:
            continue  # vgpu's pod with an unreadable assignment: the allocator failed it
        out.append(Intruder(namespace, name, tuple(sorted(containers)), meta.uid(pod)))
    return tuple(sorted(out, key=lambda i: i.key))


class PodResourcesClient:
    """``List`` on the kubelet's pod-resources socket; ``grpc.RpcError`` when it fails."""

    def __init__(self, socket_path: str, timeout: float = 5.0) -> None:
        self.socket_path = socket_path
        self._timeout = timeout

    def list(self) -> podresources_pb2.ListPodResourcesResponse:
        with grpc.insecure_channel(f"unix:{self.socket_path}") as channel:
            stub = podresources_pb2_grpc.PodResourcesListerStub(channel)
            response: podresources_pb2.ListPodResourcesResponse = stub.List(
                podresources_pb2.ListPodResourcesRequest(), timeout=self._timeout)
            return response


@dataclass(frozen=True)
class KubeletView:
    """The latest read: what the kubelet lists and what differs from the assignments."""

    up: bool = False
    devices: tuple[KubeletDevices, ...] = ()
    mismatches: tuple[Mismatch, ...] = ()
    intruders: tuple[Intruder, ...] = ()
    #: The node's GPUs at the time, to map device IDs back to them.
    known: frozenset[str] = frozenset()


class PodResourcesWatch:
    """Reads the kubelet's view every ``interval`` seconds; ``report`` gets each mismatch
    and ``intruder`` each intruder the first time it is seen (a log line, an Event), and
    :attr:`view` the latest read. A round is skipped (the view kept) unless ``quiet()``: no
    pod is being admitted."""

    def __init__(self, client: PodResourcesClient, resource: str,
                 known: Callable[[], Collection[str]], pods: Callable[[], Sequence[Obj]], *,
                 schedulers: Collection[str], report: Callable[[Mismatch], None],
                 intruder: Callable[[Intruder], None] = lambda _: None,
                 quiet: Callable[[], bool] = lambda: True) -> None:
        self._client = client
        self._resource = resource
        self._known = known
        self._pods = pods
        self._schedulers = schedulers
        self._report = report
        self._intruder = intruder
        self._quiet = quiet
        self.skipped = 0
        self._reported: set[Mismatch] = set()
        self._named: set[Intruder] = set()
        self._failing = False
        self.view = KubeletView()

    def poll(self) -> KubeletView:
        if not self._quiet():
            self.skipped += 1
            return self.view
        try:
            response = self._client.list()
        except grpc.RpcError as exc:
            if not self._failing:
                _log.warning("cannot read the kubelet's pod resources; retrying",
                             socket=self._client.socket_path,
                             reason=f"{exc.code().name}: {exc.details()}")
            self._failing = True
            self.view = KubeletView(up=False)
            return self.view
        if self._failing:
            _log.info("reading the kubelet's pod resources", socket=self._client.socket_path)
        self._failing = False
        devices = from_response(response, self._resource)
        known = frozenset(self._known())
        pods = self._pods()
        found = mismatches(devices, pods, known, self._schedulers)
        for mismatch in found:
            if mismatch not in self._reported:
                self._report(mismatch)
        self._reported = set(found)
        named = intruders(devices, pods, known, self._schedulers)
        for intruder in named:
            if intruder not in self._named:
                self._intruder(intruder)
        self._named = set(named)
        self.view = KubeletView(up=True, devices=devices, mismatches=found, intruders=named,
                                known=known)
        return self.view

    def run(self, stop: threading.Event, interval: float) -> None:
        while True:
            loops.survive("pod-resources", self.poll)  # one bad round must not end the checks
            if stop.wait(interval):
                return
