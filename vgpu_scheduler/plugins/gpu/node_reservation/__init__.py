"""A node held for a pod that asks for whole GPUs and has waited too long
(docs/scheduler.md#node-reservations).

On a busy cluster a pod that asks for eight whole GPUs waits for a node to empty, and
every time one nearly has, pods that share a GPU land on its idle GPUs and it never does.
So, as a gang scheduler does, a pod that asks only for whole GPUs, at least ``minGpus``
of them, and has waited ``waitSeconds`` (since its creation) gets a node held for it when
it fails to schedule (PostFilter): the node that needs the fewest GPUs to empty, where
the pod would pass every Filter with its GPU pods gone. While held, the node takes no GPU
pod but its holder's (unless of higher priority than the holder), and pods without GPUs
only while they leave the holder its CPU and memory; it empties as its pods end, and the
holder lands there through the ordinary filters (nothing is over-committed: the hold only
turns pods away). A hold ends when the holder is bound or deleted, when its node goes, or
after ``holdSeconds``; the pod then goes as long without one before it may hold again, so a
node it cannot fill goes back to everyone. All holds together keep at most
``maxGpuShare`` of the cluster's GPUs (each held node counted whole).

State: the holds live in the scheduler's memory, derived from the pods it sees; the turns
follow from each pod's creation time alone, so after a restart a pod that waits gets its
hold again at its next failed attempt (the node it gets is chosen again, from the
cluster as it is then).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from vgpu import logs
from vgpu.cluster.port import Obj
from vgpu.pods import is_terminated, node_name, pod_id
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import (
    SKIP,
    SUCCESS,
    Code,
    Status,
    unresolvable,
)
from vgpu_scheduler.plugins.gpu.node_reservation.decide import (
    Knobs,
    NodeView,
    eligible,
    leaves_room,
    may_hold,
    rank,
    turns_away,
    whole_gpus,
    within_cap,
)

_log = logs.get("vgpu.scheduler.reservation")

#: The Filter's reasons (the pod's FailedScheduling event counts them per node).
HELD = "node held for a pod waiting for whole GPUs"
HELD_ROOM = "node held for a pod waiting for whole GPUs: too little CPU or memory left it"
_KEY = "NodeReservation"
#: Nodes the choice tries (best first) before it gives up for this attempt.
TRIED = 8
#: A released holder's events still wake the pods its hold turned away for this long.
RELEASED_SECONDS = 60.0
_NOTHING = Status(Code.UNSCHEDULABLE)


@dataclass(frozen=True)
class Held:
    """A node held for a pod."""

    node: str
    pod: str  # uid
    key: str  # namespace/name
    priority: int
    gpus: int  # the node's healthy GPUs, what the hold counts against the cap
    created: float
    cpu: int
    memory: int
    since: float


def view(node: NodeInfo) -> NodeView:
    gpus = idle = cores = 0
    for device, usage in zip(node.devices, node.usages, strict=True):
        if not device.healthy or device.cordoned:
            continue
        gpus += 1
        idle += usage.tasks == 0
        cores += min(usage.cores, device.cores)
    return NodeView(node.name, gpus, idle, cores)


class NodeReservation:
    name = "NodeReservation"

    def __init__(self, handle: Handle) -> None:
        args = handle.config.scheduler.node_reservation
        self._knobs = Knobs(args.wait_seconds, args.hold_seconds, args.min_gpus,
                            args.max_gpu_share)
        self._handle = handle
        self._lock = threading.Lock()
        self._held: dict[str, Held] = {}
        self._by_pod: dict[str, str] = {}
        self._released: dict[str, float] = {}
        # Pods that ended lately (deleted, bound, terminated), in the order they did: a
        # PostFilter that began before the pod's event must not hold a node for it, or the
        # hold would turn pods away for nobody until its time ran out.
        self._ended: dict[str, float] = {}
        # Pods with no creation time (none the API server made): their wait counts from
        # when this scheduler first tried to hold a node for them.
        self._first_seen: dict[str, float] = {}
        handle.on_pod_event(self._on_pod)

    # -- the holds ---------------------------------------------------------------------------

    def holds(self) -> dict[str, Held]:
        """The nodes held now, by name."""
        with self._lock:
            return dict(self._held)

    def _release(self, node: str, reason: str, now: float) -> None:
        held = self._held.pop(node, None)
        if held is None:
            return
        self._by_pod.pop(held.pod, None)
        self._released[held.pod] = now
        _log.info("node hold released", node=node, pod=held.key, reason=reason,
                  held_seconds=round(now - held.since, 1))

    def _expire(self, now: float, snapshot: Snapshot | None = None) -> None:
        with self._lock:
            for node, held in list(self._held.items()):
                if not may_hold(now - held.created, self._knobs):
                    self._release(node, "hold time over", now)
                elif snapshot is not None and node not in snapshot.positions:
                    self._release(node, "node gone", now)
            for uid, at in list(self._released.items()):
                if now - at > RELEASED_SECONDS:
                    del self._released[uid]
            while self._ended:  # oldest first: only what expired is looked at
                uid, at = next(iter(self._ended.items()))
                if now - at <= RELEASED_SECONDS:
                    break
                del self._ended[uid]

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        uid = pod_id(obj)
        gone = new is None or node_name(new) is not None or is_terminated(new)
        if not gone:
            return
        now = self._handle.now()
        with self._lock:
            self._first_seen.pop(uid, None)
            self._ended.pop(uid, None)
            self._ended[uid] = now
            node = self._by_pod.get(uid)
            if node is not None:
                self._release(node, "deleted" if new is None else "bound", now)

    def tick(self, now: float) -> None:
        self._expire(now)

    def _waited(self, pod: PodInfo, now: float) -> float:
        created = pod.created
        if created is None:
            with self._lock:
                created = self._first_seen.setdefault(pod.pod_id, now)
        return now - created

    # -- PreFilter and Filter: a held node turns pods away ---------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        self._expire(state.now, snapshot)
        with self._lock:
            blocked = {node: held for node, held in self._held.items()
                       if held.pod != pod.pod_id and turns_away(held.priority, pod.priority)}
        if not blocked:
            return None, SKIP
        state.write(_KEY, blocked)
        if pod.gpu is None or not pod.gpu.is_gpu_pod:
            return None, SUCCESS  # Filter weighs its CPU and memory node by node
        mask = snapshot.mask()
        for node in blocked:
            pos = snapshot.positions.get(node)
            if pos is not None:
                mask[pos] = False
        return PreFilterResult(mask=mask), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        blocked: Mapping[str, Held] = state.read(_KEY) or {}
        held = blocked.get(node.name)
        if held is None:
            return SUCCESS
        if pod.gpu is not None and pod.gpu.is_gpu_pod:
            return unresolvable(HELD)
        others = [p.info for p in node.pods.values()
                  if p.assignment is None and p.info.pod_id != held.pod]
        static = node.static
        if (leaves_room(static.alloc_cpu, sum(p.cpu_milli for p in others), pod.cpu_milli,
                        held.cpu)
                and leaves_room(static.alloc_memory, sum(p.memory for p in others),
                                pod.memory, held.memory)):
            return SUCCESS
        return unresolvable(HELD_ROOM)

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        """A hold ends when its holder is bound or deleted (a pod event of the holder), or
        with time, which a pod deletion elsewhere then brings to light."""
        if event.resource != "pod":
            return False
        if event.action == "delete":
            return True
        if event.obj is None:
            return False
        uid = pod_id(event.obj)
        with self._lock:
            return uid in self._by_pod or uid in self._released

    # -- PostFilter: a pod that waited gets a node held --------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    diagnosis: Diagnosis) -> Status:
        need = whole_gpus(pod.gpu)
        if not eligible(need, self._knobs):
            return _NOTHING
        now = state.now
        waited = self._waited(pod, now)
        if not may_hold(waited, self._knobs):
            return _NOTHING
        with self._lock:
            mine = self._by_pod.get(pod.pod_id)
            held_gpus = sum(h.gpus for h in self._held.values())
            taken = set(self._held)
        if mine is not None and mine in snapshot.positions:
            return Status(Code.UNSCHEDULABLE, (f"node reservation: {mine} is held for the "
                                               f"pod (waiting {waited:.0f} s)",))
        chosen = self._choose(state, pod, snapshot, need, held_gpus=held_gpus, taken=taken)
        if chosen is None:
            return _NOTHING
        info, gpus = chosen
        held = Held(info.name, pod.pod_id, pod.key, pod.priority, gpus,
                    now - waited, pod.cpu_milli, pod.memory, now)
        with self._lock:
            if info.name in self._held or pod.pod_id in self._by_pod:
                return _NOTHING  # another thread held it meanwhile
            if pod.pod_id in self._ended:
                return _NOTHING  # deleted or bound while the node was chosen
            self._held[info.name] = held
            self._by_pod[pod.pod_id] = info.name
        _log.info("node held", node=info.name, pod=pod.key, gpus=need,
                  waited_seconds=round(waited, 1))
        return Status(Code.UNSCHEDULABLE, (f"node reservation: {info.name} is now held for "
                                           f"the pod (waiting {waited:.0f} s)",))

    def _choose(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, need: int, *,
                held_gpus: int, taken: set[str]) -> tuple[NodeInfo, int] | None:
        views: list[tuple[tuple[int, int, int, str], NodeInfo, int]] = []
        cluster_gpus = 0
        for info in snapshot:
            seen = view(info)
            cluster_gpus += seen.gpus
            if seen.gpus >= need and info.name not in taken:
                views.append((rank(seen, need), info, seen.gpus))
        views.sort(key=lambda v: v[0])
        tried = 0
        for _, info, gpus in views:
            if not within_cap(held_gpus, gpus, cluster_gpus, self._knobs):
                continue
            if self._fits_emptied(state, pod, info):
                return info, gpus
            tried += 1
            if tried >= TRIED:
                break
        return None

    def _fits_emptied(self, state: CycleState, pod: PodInfo, info: NodeInfo) -> bool:
        """Whether the pod passes every Filter on the node once its GPU pods are gone."""
        kept = {uid: p for uid, p in info.pods.items() if p.assignment is None}
        room = NodeInfo.of(info.static, info.scaling, kept)
        trial = state.clone()
        for uid, placed in info.pods.items():
            if uid not in kept and not self._handle.remove_pod(trial, pod, placed, room).ok:
                return False
        return self._handle.run_filters(trial, pod, room).ok
