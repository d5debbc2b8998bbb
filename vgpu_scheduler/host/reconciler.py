"""A backstop for the cache: what it counts, compared with a fresh tally from the
informers' stores, and repaired where they differ (issue 50).

kube-scheduler's cache comparer (``pkg/scheduler/backend/cache/debugger``) lists the nodes
and pods of its informers and of its cache and logs the difference, on a signal. Here the
comparison runs every ``scheduler.cacheReconcileSeconds`` and after every re-list, and a
difference is logged, counted (``vgpu_scheduler_cache_drift_total``, by kind) and
repaired, so no drift outlives one period whatever its cause (a handler that failed on an
event, a re-list a handler misread):

- ``stale-pod``: the cache counts a bound pod that the store no longer holds bound (gone,
  ended, or another pod under its name): its room is given back;
- ``missing-pod``: the store holds a bound pod that the cache does not count: counted;
- ``outdated-pod``: the cache's copy of a bound pod is older than the store's: brought up
  to date as its watch event would have;
- ``missing-node`` and ``stale-node``: nodes the store and the cache disagree on;
- ``node-totals``: a node's totals differ from its pods counted afresh: recounted (the
  nodes whose pods changed since their last audit: a total only goes wrong on a change).

What is in flight is never drift: an assumed pod (its Binding sent, in doubt or not) and a
nominated claim hold room the store cannot show yet; their own deadlines settle them. Each
difference found is checked again, and repaired, while the store's informer applies no
event, so a pod the watch changes meanwhile is never repaired from a stale reading.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from vgpu import logs, meta
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import Kind, Obj
from vgpu.pods import is_terminated, node_name, pod_id
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.handlers import Handlers
from vgpu_scheduler.host.pod_records import PodRecord

_log = logs.get("vgpu.scheduler.reconciler")

STALE_POD = "stale-pod"
MISSING_POD = "missing-pod"
OUTDATED_POD = "outdated-pod"
STALE_NODE = "stale-node"
MISSING_NODE = "missing-node"
NODE_TOTALS = "node-totals"
KINDS = (STALE_POD, MISSING_POD, OUTDATED_POD, STALE_NODE, MISSING_NODE, NODE_TOTALS)


@dataclass(frozen=True)
class Drift:
    """One difference found and repaired: its kind, the pod or node, and what differed."""

    kind: str
    key: str
    detail: str


def _holds_room(pod: Obj | None) -> bool:
    return pod is not None and node_name(pod) is not None and not is_terminated(pod)


def _pod_drift(rec: PodRecord | None, pod: Obj | None) -> str | None:
    """The kind of drift between the cache's record of a pod and the store's copy of the
    pod (None: none, or the record is in flight, which is never drift)."""
    if rec is not None and (rec.assumed or rec.nominated):
        return None
    bound = pod if _holds_room(pod) else None
    if rec is None:
        return None if bound is None else MISSING_POD
    if bound is None or pod_id(bound) != rec.pod_id:
        return STALE_POD
    if meta.resource_version(bound) != meta.resource_version(rec.obj):
        return OUTDATED_POD
    return None


class Reconciler:
    """Compares and repairs on :meth:`run_once`; thread-safe (one round at a time)."""

    def __init__(self, cache: Cache, handlers: Handlers, *,
                 informer: Callable[[Kind], Informer | None],
                 wake: Callable[[ClusterEvent], object]) -> None:
        self._cache = cache
        self._handlers = handlers
        self._informer = informer
        self._wake = wake
        self._round = threading.Lock()
        # Apart from the round's lock: a scrape must not wait for a round.
        self._counted = threading.Lock()
        self._counts = dict.fromkeys(KINDS, 0)
        self.rounds = 0

    def counts(self) -> dict[str, int]:
        """Drifts repaired so far, by kind."""
        with self._counted:
            return dict(self._counts)

    def run_once(self) -> list[Drift]:
        """One comparison of the cache with the stores; returns what was repaired."""
        pods, nodes = self._informer("pods"), self._informer("nodes")
        if pods is None or nodes is None or not (pods.synced.is_set()
                                                 and nodes.synced.is_set()):
            return []
        with self._round:
            found = [*self._pods(pods), *self._nodes(nodes), *self._totals()]
            for drift in found:
                with self._counted:
                    self._counts[drift.kind] += 1
                _log.warning("scheduler cache drift repaired", kind=drift.kind, at=drift.key,
                             detail=drift.detail)
            self.rounds += 1
            return found

    def _pods(self, pods: Informer) -> list[Drift]:
        # First a reading without holding the watch up, then each suspect again under it.
        # A record made from the very object the store holds under its key is that object's
        # word (its handler was given the stored object): only the others are suspects.
        # By identity, so that a round at 150,000 pods parses and keys none of them.
        store = pods.snapshot()
        records = self._cache.records()
        counted = {id(r.obj) for r in records}
        suspects = [(r.key, r.pod_id) for r in records
                    if not (r.assumed or r.nominated) and store.get(r.key) is not r.obj]
        suspects += [(key, pod_id(p)) for key, p in store.items()
                     if id(p) not in counted and _holds_room(p)]
        repaired: list[Drift] = []
        for key, uid in suspects:
            with pods.holding():
                drift = self._repair_pod(key, uid, pods.get(key))
            if drift is not None:
                repaired.append(drift)
        return repaired

    def _repair_pod(self, key: str, uid: str, pod: Obj | None) -> Drift | None:
        rec = self._cache.pod(uid)
        if pod is not None and pod_id(pod) != uid:
            # Another pod holds the name now: for the suspect, the store has nothing.
            pod = None
        kind = _pod_drift(rec, pod)
        if kind is None:
            return None
        if kind == STALE_POD:
            assert rec is not None
            self._cache.remove_pod(uid)
            return Drift(kind, key, f"uid {uid} on node {rec.node}: not bound in the store")
        assert pod is not None
        self._handlers.resync_bound(pod)
        before = "none" if rec is None else meta.resource_version(rec.obj)
        return Drift(kind, key, f"uid {uid} on node {node_name(pod)}: resourceVersion "
                                f"{before} in the cache, {meta.resource_version(pod)} stored")

    def _nodes(self, nodes: Informer) -> list[Drift]:
        stored = set(nodes.snapshot())  # a node's key is its name
        cached = set(self._cache.node_names())
        repaired: list[Drift] = []
        for name in sorted(stored ^ cached):
            with nodes.holding():
                node = nodes.get(name)
                known = self._cache.node_info(name) is not None
                if node is not None and not known:
                    self._handlers.on_node(None, node)
                    repaired.append(Drift(MISSING_NODE, name, "stored, not in the cache"))
                elif node is None and known:
                    self._handlers.on_node({"metadata": {"name": name}}, None)
                    repaired.append(Drift(STALE_NODE, name, "in the cache, not stored"))
        return repaired

    def _totals(self) -> list[Drift]:
        repaired: list[Drift] = []
        for name in self._cache.changed_since_audit():
            differs = self._cache.audit_node(name)
            if differs is not None:
                # The recount may have freed room: the parked pods it could help look again.
                self._wake(ClusterEvent("pod", "delete", name))
                repaired.append(Drift(NODE_TOTALS, name, f"recounted: {differs}"))
        return repaired
