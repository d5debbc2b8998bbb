"""The scheduler's cache: nodes and the pods on them, with assumed placements.

State is derived only from Node objects (inventory, heartbeat, allocatable) and Pod
objects (``spec.nodeName``, requests, the ``vgpu.io/assignment`` annotation); nothing is
stored anywhere else, so a restarted scheduler rebuilds it from one list of each.

A placement decided by the scheduler is *assumed* at once (its GPU slices and CPU count
against the node before the API server has even seen the binding), so the next decision,
made microseconds later, never hands out the same slice. The watch later *confirms* it;
a failed binding *forgets* it; an assumption whose binding finished but never showed up
in the watch *expires* after ``assume_ttl``.

As kube-scheduler's cache (``pkg/scheduler/backend/cache``): pods are keyed by uid
(:func:`vgpu.pods.pod_id`), so a pod deleted and recreated under its name is another pod;
a pod the watch showed bound is never assumed over (the cycle that decided it is stale);
and ``forget`` and ``finish_binding`` act on the very assumption ``assume`` returned, never
on what replaced it since. Two rules go further, because nothing after the scheduler
refuses a vGPU slice that does not fit (the kubelet checks CPU and memory, not slices):
an assumption is refused when its slices no longer fit what the cache counts now
(:mod:`.room`), and a deleted pod's assumption stays while its Binding may still land
(a server before 1.23 binds a successor of the name with it; the successor's record
takes its place when the watch shows it bound with those slices).

Room a pod gave up (its record forgotten, removed, expired, replaced elsewhere, or a
nomination cleared) is reported through one callback, ``on_freed``, as the pod deletion
event that wakes the parked pods it could help; the scheduler wires it to its queue. It is
called after the cache's lock is released: the queue asks the plugins' hints, which may read
the cache.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

from vgpu import logs, usage
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment
from vgpu.config import Config
from vgpu.pods import is_terminated, node_name, pod_id
from vgpu_scheduler.framework import compute
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodeStatic, parse_node, static_changes
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.host.pod_records import (
    PodRecord,
    bound_record,
    confirmed,
    kept_claim,
    refreshed,
    same_record,
)
from vgpu_scheduler.host.room import BOUND, IN_DOUBT, Refused, no_room

_log = logs.get("vgpu.scheduler.cache")

#: Pod changes a node may have waiting to be folded into its NodeInfo (see Cache._info).
_MAX_PENDING = 64

Freed = Callable[[ClusterEvent], object]
"""Told of room given up on a node: a pod deletion event carrying the freed GPU slices."""


def _nobody(event: ClusterEvent) -> None:
    del event


class Cache:
    def __init__(self, *, scaling: float = 1.0, assume_ttl: float = 120.0,
                 heartbeat_expiry: float = 180.0, config: Config | None = None,
                 on_freed: Freed = _nobody) -> None:
        self._config = config or Config()
        self._on_freed = on_freed
        self._lock = threading.RLock()
        self._scaling = scaling
        self._ttl = assume_ttl
        self._expiry = heartbeat_expiry
        self._statics: dict[str, NodeStatic] = {}
        self._infos: dict[str, NodeInfo] = {}
        self._pods: dict[str, PodRecord] = {}
        # Pods by node name, also for nodes not (or no longer) known: the node may arrive
        # after its pods, and must then start with them counted.
        self._by_node: dict[str, dict[str, PodRecord]] = {}
        # Insertion-ordered, so nodes take snapshot positions in the order they arrived
        # and every run of the same event sequence makes the same decisions.
        self._dirty: dict[str, None] = {}
        # Pod changes (record, +1 or -1) not yet in their node's NodeInfo; see _info.
        self._pending: dict[str, list[tuple[PodRecord, int]]] = {}
        # Nodes whose pods changed since the reconciler last audited their totals.
        self._unaudited: dict[str, None] = {}
        # (deadline, order, record): a heap, as an in-doubt deadline can come before a
        # confirmation deadline handed out earlier.
        self._deadlines: list[tuple[float, int, PodRecord]] = []
        self._order = itertools.count()

    # -- reading ---------------------------------------------------------------------------

    def node_info(self, name: str) -> NodeInfo | None:
        with self._lock:
            return self._info(name)

    def node_names(self) -> list[str]:
        with self._lock:
            return list(self._infos)

    def pod(self, uid: str) -> PodRecord | None:
        """The record of the pod with this :func:`~vgpu.pods.pod_id`."""
        with self._lock:
            return self._pods.get(uid)

    def in_doubt(self, uid: str) -> bool:
        """Whether the pod's last Binding is in doubt (:mod:`.in_doubt`)."""
        with self._lock:
            rec = self._pods.get(uid)
            return rec is not None and rec.in_doubt

    def assumed(self) -> list[PodRecord]:
        with self._lock:
            return [r for r in self._pods.values() if r.assumed]

    def records(self) -> list[PodRecord]:
        """Every pod's record (bound, assumed or nominated), as they stand now."""
        with self._lock:
            return list(self._pods.values())

    def __len__(self) -> int:
        return len(self._infos)

    # -- nodes -----------------------------------------------------------------------------

    def set_node(self, node: Obj, now: float) -> ClusterEvent | None:
        """Add or update a node; the event says what changed (None: nothing that matters)."""
        static = parse_node(node)
        if static.error:
            _log.warning("node is malformed; it takes no pods", node=static.name,
                         error=static.error)
        with self._lock:
            old = self._statics.get(static.name)
            self._statics[static.name] = static
            info = self._info(static.name)
            if info is None:
                self._infos[static.name] = self._build(static)
                self._dirty[static.name] = None
                return ClusterEvent("node", "add", static.name, obj=node)
            self._infos[static.name] = info.replace(static=static)
            self._dirty[static.name] = None
            changes = static_changes(old, static, self._expiry, now) if old else frozenset()
            if not changes:
                return None
            return ClusterEvent("node", "update", static.name, changes=changes, obj=node)

    def remove_node(self, name: str) -> ClusterEvent | None:
        with self._lock:
            self._statics.pop(name, None)
            self._pending.pop(name, None)
            if self._infos.pop(name, None) is None:
                return None
            self._dirty[name] = None
            return ClusterEvent("node", "delete", name)

    def _build(self, static: NodeStatic) -> NodeInfo:
        records = self._by_node.get(static.name, {})
        return NodeInfo.of(static, self._scaling,
                           {uid: rec.on_node() for uid, rec in records.items()})

    def changed_since_audit(self) -> list[str]:
        """The nodes whose pods changed since :meth:`audit_node` last looked at them."""
        with self._lock:
            changed, self._unaudited = list(self._unaudited), {}
            return changed

    def audit_node(self, name: str) -> str | None:
        """Compare the node's totals, as its pods' changes added them up, with its pods
        counted afresh; when they differ, take the fresh count and say what differed."""
        with self._lock:
            info = self._info(name)
            static = self._statics.get(name)
            if info is None or static is None:
                return None
            fresh = self._build(static)
            differs = [what for what, kept, now in (
                ("GPU usage", dict(info.gpu_usage), dict(fresh.gpu_usage)),
                ("pods", set(info.pods), set(fresh.pods)),
                ("CPU", info.requested_cpu, fresh.requested_cpu),
                ("memory", info.requested_memory, fresh.requested_memory),
                ("pod count", info.pod_count, fresh.pod_count),
                ("other resources", dict(info.requested_other), dict(fresh.requested_other)),
            ) if kept != now]
            if not differs:
                return None
            self._infos[name] = fresh
            self._dirty[name] = None
            return ", ".join(differs)

    # -- pods ------------------------------------------------------------------------------

    def _apply(self, rec: PodRecord, sign: int) -> None:
        records = self._by_node.setdefault(rec.node, {})
        uid = rec.pod_id
        if sign > 0:
            records[uid] = rec
            self._pods[uid] = rec
        else:
            records.pop(uid, None)
            if not records:
                del self._by_node[rec.node]
            if self._pods.get(uid) is rec:
                del self._pods[uid]
        if rec.node not in self._infos:
            return
        # Folded into the node's NodeInfo when it is next read: a cold start adds every
        # pod of a node in a row, and building a NodeInfo per pod was a third of it.
        changes = self._pending.setdefault(rec.node, [])
        changes.append((rec, sign))
        self._dirty[rec.node] = None
        self._unaudited[rec.node] = None
        if len(changes) >= _MAX_PENDING:
            # A follower replica reads no NodeInfo between scrapes: keep what waits bounded.
            self._info(rec.node)

    def _info(self, name: str) -> NodeInfo | None:
        """The node's NodeInfo with the pending pod changes folded in (under the lock)."""
        info = self._infos.get(name)
        changes = self._pending.pop(name, None)
        if info is None or not changes:
            return info
        usages = dict(info.gpu_usage)
        pods = dict(info.pods)
        cpu, memory, count = info.requested_cpu, info.requested_memory, info.pod_count
        for rec, sign in changes:
            usage.apply(usages, rec.assignment, sign)
            if sign > 0:
                pods[rec.pod_id] = rec.on_node()
            else:
                pods.pop(rec.pod_id, None)
            cpu += sign * rec.cpu
            memory += sign * rec.memory
            count += sign
        other = compute.added(info.requested_other,
                              ((rec.info.resources, sign) for rec, sign in changes))
        info = self._infos[name] = info.replace(
            requested_cpu=cpu, requested_memory=memory, pod_count=count, gpu_usage=usages,
            pods=pods, requested_other=other)
        return info

    def _freed(self, rec: PodRecord, obj: Obj | None = None) -> None:
        """Report the room ``rec`` held as given up (outside the lock); ``obj`` is the pod
        as the watch showed it, when a watch event freed it."""
        self._on_freed(ClusterEvent("pod", "delete", rec.node, freed=rec.assignment, obj=obj))

    def set_pod(self, pod: Obj) -> tuple[PodRecord | None, PodRecord | None]:
        """Record what a pod from the watch takes; returns (previous, current) records.

        A pod the cache assumed is confirmed here. A pod that is pending, or that reached
        a terminal phase, takes nothing (an assumed pending pod keeps its assumption). A
        nominated pod bound meanwhile (by another binder) is counted as bound from now on.
        Room given up where the pod was counted is reported freed: the pod ended, or it
        was bound elsewhere than assumed or nominated (another binder won the race).
        """
        before, after = self._set_pod(pod)
        if before is not None and before is not after and (
                after is None or before.node != after.node
                or before.assignment != after.assignment):
            self._freed(before, pod)
        return before, after

    def _set_pod(self, pod: Obj) -> tuple[PodRecord | None, PodRecord | None]:
        uid = pod_id(pod)
        with self._lock:
            old = self._pods.get(uid)
            # Most updates of a bound pod (the agent's phase, the kubelet's status) change
            # nothing it takes: parsing it again was a fifth of the scheduler's CPU in a
            # burst (py-spy, bench/bind.py --profile).
            fresh = None
            if old is not None and not old.nominated:
                if not old.assumed:
                    if old.node == node_name(pod) and same_record(old.obj, pod):
                        fresh = refreshed(old, pod)
                else:
                    fresh = confirmed(old, pod, self._config.vgpu_schedulers)
            if fresh is not None:
                self._swap(fresh)
                return old, fresh
        new = bound_record(pod, self._config)
        with self._lock:
            old = self._pods.get(uid)
            if new is None:
                if old is None or ((old.assumed or old.nominated) and node_name(pod) is None
                                   and not is_terminated(pod)):
                    return old, old
                self._apply(old, -1)
                return old, None
            if old is not None:
                new = kept_claim(old, new)
                if not old.nominated and old.same_placement(new):
                    # Confirmation or a status/annotation change: swap the record in place
                    # without touching the node's usage.
                    self._swap(new)
                    return old, new
                self._apply(old, -1)
            self._drop_predecessor(new)
            self._apply(new, +1)
            return old, new

    def _drop_predecessor(self, new: PodRecord) -> None:
        """A pod shows up bound with the very slices the cache assumed for a predecessor
        of its name (a server before 1.23 carried the predecessor's Binding out on it):
        its record takes over from that assumption, or they would count the slices
        twice until the assumption expired."""
        if new.assignment is None:
            return
        for rec in list(self._by_node.get(new.node, {}).values()):
            if (rec.assumed and rec.key == new.key and rec.pod_id != new.pod_id
                    and rec.assignment == new.assignment):
                self._apply(rec, -1)

    def _swap(self, new: PodRecord) -> None:
        """``new`` in place of the pod's record, on the same node with the same usage."""
        self._pods[new.pod_id] = new
        self._by_node.setdefault(new.node, {})[new.pod_id] = new

    def remove_pod(self, uid: str, gone: Obj | None = None) -> PodRecord | None:
        """The pod is gone (``gone``: as the watch showed it deleted): its record leaves
        (returned) and its room is reported freed, except an assumption whose Binding may
        still be in flight, which its binding cycle forgets or finishes."""
        with self._lock:
            old = self._pods.get(uid)
            if old is None or (old.assumed and (old.in_doubt or not old.binding_finished)):
                return None
            self._apply(old, -1)
        self._freed(old, gone)
        return old

    def assume(self, pod: PodInfo, node: str,
               assignment: Assignment | None = None) -> PodRecord | Refused:
        """Count a placement the scheduler just decided, before it is bound, with the GPU
        slices Reserve claimed for it; returns the assumption, to forget or finish later.

        Nothing changes, and the answer says why, when the decision is stale: the watch has
        shown the pod bound meanwhile (by another binder: a second replica, an old leader;
        it stays counted where it is), or the slices no longer fit what the node holds now.
        A nomination, or an assumption whose binding went unanswered, is replaced.
        """
        rec = PodRecord(key=pod.key, node=node, info=pod, assignment=assignment, assumed=True)
        with self._lock:
            old = self._pods.get(pod.pod_id)
            if old is not None and not (old.assumed or old.nominated):
                return BOUND
            if old is not None and old.in_doubt:
                # Replacing it would free room its Binding may still take.
                return IN_DOUBT
            if old is not None:
                self._apply(old, -1)
            info = self._info(node)
            reason = None if info is None else no_room(info, assignment)
            if reason is not None:
                if old is not None:
                    self._apply(old, +1)
                return Refused(reason)
            self._apply(rec, +1)
        return rec

    def nominate(self, pod: PodInfo, node: str, claim: Assignment | None) -> None:
        """Hold room on ``node`` for a pending pod that preempted others there (its CPU,
        memory and GPU ``claim``), until it is assumed, bound, deleted or nominated again."""
        rec = PodRecord(key=pod.key, node=node, info=pod, assignment=claim, nominated=True)
        with self._lock:
            old = self._pods.get(pod.pod_id)
            if old is not None and not old.nominated:
                return  # assumed or bound already: that is the room it takes
            if old is not None:
                self._apply(old, -1)
            self._apply(rec, +1)

    def clear_nomination(self, uid: str) -> PodRecord | None:
        """Give up the room a nomination held, reported freed."""
        rec = self.lend_nomination(uid)
        if rec is not None:
            self._freed(rec)
        return rec

    def lend_nomination(self, uid: str) -> PodRecord | None:
        """Give the room a nomination holds back to its pod for one attempt (kube takes the
        pod out of the nominator and adds it back the same way); nothing is reported until
        :meth:`settle_lent` after the attempt, so that room the pod takes again wakes no
        one."""
        with self._lock:
            rec = self._pods.get(uid)
            if rec is None or not rec.nominated:
                return None
            self._apply(rec, -1)
            return rec

    def settle_lent(self, held: PodRecord) -> None:
        """After the attempt :meth:`lend_nomination` served: the room ``held`` held is
        reported freed unless the pod takes room on that node again; wherever else it went
        (scheduled or nominated elsewhere, or waiting again), the room is free for others."""
        with self._lock:
            now = self._pods.get(held.pod_id)
        if now is None or now.node != held.node:
            self._freed(held)

    def finish_binding(self, rec: PodRecord, now: float) -> None:
        """The binding of the assumption ``rec`` returned: start the clock on the watch
        confirming it (nothing if the watch already did, or the pod is gone)."""
        with self._lock:
            if self._pods.get(rec.pod_id) is rec:
                rec.binding_finished = True
                rec.deadline = now + self._ttl
                heapq.heappush(self._deadlines, (rec.deadline, next(self._order), rec))

    def hold_in_doubt(self, rec: PodRecord, now: float, seconds: float) -> bool:
        """The Binding of the assumption ``rec`` went out and its answer was lost: keep its
        room for ``seconds`` (how late the request could still land) unless the watch shows
        the pod bound or gone sooner; False when ``rec`` is no longer in place."""
        with self._lock:
            if self._pods.get(rec.pod_id) is not rec:
                return False
            rec.binding_finished = True
            rec.in_doubt = True
            rec.deadline = now + seconds
            heapq.heappush(self._deadlines, (rec.deadline, next(self._order), rec))
            return True

    def forget(self, rec: PodRecord) -> bool:
        """Drop the assumption ``rec`` (as :meth:`assume` returned it), whose binding
        failed, and report its room freed; False when it is no longer in place (confirmed,
        replaced or removed since), which is then left alone."""
        with self._lock:
            if self._pods.get(rec.pod_id) is not rec:
                return False
            self._apply(rec, -1)
        self._freed(rec)
        return True

    def expire(self, now: float) -> list[PodRecord]:
        """Drop assumptions bound more than ``assume_ttl`` ago and never confirmed, and
        report their room freed."""
        stale: list[PodRecord] = []
        with self._lock:
            queue = self._deadlines
            while queue and queue[0][0] < now:
                _, _, rec = heapq.heappop(queue)
                # Only if that very assumption is still in place (not confirmed, forgotten
                # or replaced since).
                if rec.assumed and self._pods.get(rec.pod_id) is rec:
                    stale.append(rec)
            for rec in stale:
                _log.warning("binding in doubt expired with the pod still unbound"
                             if rec.in_doubt else
                             "assumed pod expired without its binding confirmed", pod=rec.key,
                             node=rec.node)
                self._apply(rec, -1)
        for rec in stale:
            self._freed(rec)
        return stale

    # -- snapshot --------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> int:
        """Bring ``snapshot`` up to date with the nodes changed since the last call;
        returns how many nodes were copied in."""
        with self._lock:
            dirty, self._dirty = self._dirty, {}
            for name in dirty:
                info = self._info(name)
                if info is None:
                    snapshot.remove(name)
                else:
                    snapshot.set(info)
            return len(dirty)
