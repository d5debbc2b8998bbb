"""DefaultPreemption: when no node fits, make room by evicting lower-priority pods.

kube-scheduler's PostFilter of the same name (``Evaluator.Preempt``), step by step:

1. The pod must be eligible: not ``preemptionPolicy: Never``, and not still waiting for
   the victims of its last preemption (a lower-priority pod on its nominated node being
   deleted by a preemption; the pod then holds its nomination again and waits).
2. The potential nodes: those the filters rejected for reasons that removing pods can
   cure (:mod:`.candidates`). A per-node column of the lowest priority on the node lets
   a pod that outranks nobody anywhere stop here with one vector comparison.
3. A simulation on a sample of them finds each node's fewest, least important victims
   (:mod:`.victims`); the best node wins by kube's criteria.
4. The pod is nominated there: the host's cache holds its claim at once (its GPU slices
   on the node without the victims, as the vGPU plugin would place them), so that
   nothing else takes the room while the victims terminate, and lower-priority
   nominations on that node give theirs up. The API calls (:mod:`.calls` decides them,
   :mod:`.evict` sends them: the victims' evictions, their events, the nominations'
   ``status.nominatedNodeName``) run off the scheduling loop (``Handle.preempt``, kube's
   asynchronous preemption); the pod is not tried again until they are done, and if they
   fail its nomination is given up and it backs off. The host lends the pod its room back
   when it is next attempted.

The victims' PodDisruptionBudgets, which the choice of victims respects where it can, are
read in :mod:`.budgets`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from operator import attrgetter

import numpy as np

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import NEVER, PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import Code, Status, error, unresolvable, unschedulable
from vgpu_scheduler.plugins.kube.default_preemption import candidates as cand
from vgpu_scheduler.plugins.kube.default_preemption.budgets import parse_budgets
from vgpu_scheduler.plugins.kube.default_preemption.calls import plan
from vgpu_scheduler.plugins.kube.default_preemption.evict import (
    Carrier,
    set_nominated_node,
    terminating_by_preemption,
)
from vgpu_scheduler.plugins.kube.default_preemption.started import (
    Started,
    StartedPreemptions,
)
from vgpu_scheduler.plugins.kube.default_preemption.victims import (
    NO_VICTIMS,
    Candidate,
    Dominated,
    Lower,
    Rank,
    bound,
    lower_priority,
    select_victims,
)

MIN_PRIORITY = "preemption.min_priority"
#: The column's value for a node without pods: above any pod priority (int32).
NO_PODS = 2**40

NEVER_PREEMPTS = "preemption: not eligible due to preemptionPolicy=Never."
WAITING = "preemption: not eligible due to a terminating pod on the nominated node."
_NO_VICTIMS = unresolvable(NO_VICTIMS)
_RESOURCES_FIT = "NodeResourcesFit"


_PRIORITY = attrgetter("info.priority")


def _min_priority(node: NodeInfo) -> int:
    # Computed on every node change, for every node: map() over the pods, no generator.
    lowest: int = min(map(_PRIORITY, node.pods.values()), default=NO_PODS)
    return lowest


def nominated_node(pod: Obj) -> str | None:
    name = (pod.get("status") or {}).get("nominatedNodeName")
    return str(name) if name else None


class DefaultPreemption:
    name = "DefaultPreemption"

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._budgets = handle.lister("poddisruptionbudgets")
        self._pods = handle.lister("pods")
        self.min_candidate_percentage = cand.MIN_CANDIDATE_NODES_PERCENTAGE
        self.min_candidate_absolute = cand.MIN_CANDIDATE_NODES_ABSOLUTE
        # Seeded: the same event sequence makes the same decisions (simulations, tests).
        self._random = random.Random(0)
        #: Where the simulation starts among n potential nodes (kube: a random offset).
        self.offset: Callable[[int], int] = self._random.randrange
        self.started = StartedPreemptions()
        handle.on_pod_event(self.started.seen)

    def columns(self) -> Sequence[Column]:
        return (Column(MIN_PRIORITY, np.int64, _min_priority, NO_PODS),)

    def fresh(self, placed: NodePod) -> Obj:
        """The pod as the watch last showed it (the cache keeps the placed version)."""
        return self._pods.get(placed.info.key) or placed.info.pod

    # -- PostFilter ------------------------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    diagnosis: Diagnosis) -> Status:
        if pod.preemption_policy == NEVER:
            return unschedulable(NEVER_PREEMPTS)
        current = self._pods.get(pod.key) or pod.pod
        started = self.started.get(pod.pod_id)
        shown = nominated_node(current)
        nominated = started.node if started is not None else shown
        if nominated is not None and self._still_terminating(state, pod, snapshot,
                                                             diagnosis, nominated):
            return unschedulable(WAITING)
        if not len(snapshot):
            return unschedulable("preemption: no nodes available")
        potential = cand.potential_nodes(diagnosis, snapshot)
        found, statuses = self.find_candidates(state, pod, snapshot, potential)
        if not found:
            failed = next((s for s in statuses.values() if s.code is Code.ERROR), None)
            if failed is not None:
                return error(f"preemption: {failed.message}")
            return self._nothing_helps(pod, shown, len(snapshot), len(potential),
                                       statuses)
        return self._prepare(state, pod, cand.pick_one(found), shown)

    def _nothing_helps(self, pod: PodInfo, shown: str | None, total: int, potential: int,
                       statuses: dict[str, Status]) -> Status:
        self.started.forget(pod.pod_id)
        cluster = self._handle.cluster
        if shown is not None and cluster is not None:
            # Preemption cannot help any more: the pod is nominated nowhere (kube clears
            # the field the same way).
            set_nominated_node(cluster, pod, None)
        return unschedulable(cand.nothing_helps(total, potential, statuses))

    def _still_terminating(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                           diagnosis: Diagnosis, name: str) -> bool:
        """Whether the victims of the pod's last preemption are still leaving its
        nominated node (kube's ``PodEligibleToPreemptOthers``); if so the pod holds its
        nomination again, with the claim it gets once they are gone."""
        node = snapshot.get(name)
        if node is None:
            return False
        status = diagnosis.pod_status or diagnosis.statuses.get(name) or \
            self._handle.run_filters(state, pod, node)
        if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return False  # the node cannot take the pod any more: preempt elsewhere
        leaving = self._leaving(pod, node)
        if not leaving:
            return False
        room = NodeInfo.of(node.static, node.scaling,
                           {k: p for k, p in node.pods.items() if k not in leaving})
        self._handle.nominate(pod, name, state.claim_on(room))
        return True

    def _leaving(self, pod: PodInfo, node: NodeInfo) -> set[str]:
        """The pods of lower priority leaving ``node``, the pod's nominated node, because
        a scheduler preempted them."""
        started = self.started.get(pod.pod_id)
        mine = started.victims if started is not None and started.node == node.name \
            else frozenset()
        lower = {key: placed for key, placed in node.pods.items()
                 if placed.info.priority < pod.priority and not placed.nominated}
        # Its own victims' evictions went through: leaving, whether or not the watch shows
        # them deleted yet (a pod with no grace period is gone without being marked).
        leaving = {key for key, placed in lower.items() if placed.info.pod_id in mine}
        deleting = {key: placed for key, placed in lower.items()
                    if key not in leaving and meta.deleting(self.fresh(placed))}
        if deleting:
            # Asked only now, off the common path: the first time, a look-up of the API
            # server's version.
            conditions = self._conditions()
            leaving |= {key for key, placed in deleting.items()
                        if terminating_by_preemption(self.fresh(placed), conditions)}
        return leaving

    def find_candidates(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                        potential: cand.Positions, *, every: bool = False,
                        ) -> tuple[list[Candidate], dict[str, Status]]:
        """kube's ``DryRunPreemption`` over the ``potential`` positions: the candidates
        (those breaking no budget first; ``every``: also those that cannot be chosen,
        with their victims, as kube lists them) and the other nodes' statuses."""
        outranks = snapshot.column(MIN_PRIORITY)[potential] < pod.priority
        if not outranks.any():
            # Nobody on these nodes has a lower priority: the cheap answer for most pods.
            return [], {}
        budgets = parse_budgets(self._budgets.items())
        has_lower = dict(zip(potential.tolist(), outranks.tolist(), strict=True))
        now = state.now

        # The bound that lets a node be passed over reads NodeResourcesFit's sums.
        bounded = not every and _RESOURCES_FIT in self._handle.config.scheduler.plugins \
            and _RESOURCES_FIT not in state.skip_filter
        lowers: dict[str, Lower] = {}

        def lower_of(node: NodeInfo) -> Lower:
            found = lowers.get(node.name)
            if found is None:
                found = lowers[node.name] = lower_priority(pod, node, self.fresh, now)
            return found

        def simulate(node: NodeInfo, cutoff: Rank | None) -> Candidate | Dominated | Status:
            if not has_lower[snapshot.positions[node.name]]:
                return _NO_VICTIMS
            return select_victims(self._handle, state.clone(), pod, node, budgets=budgets,
                                  fresh=self.fresh, now=now, lower=lower_of(node),
                                  cutoff=cutoff if bounded else None)

        def best_on(node: NodeInfo) -> Rank | None:
            if not has_lower[snapshot.positions[node.name]]:
                return None
            return bound(pod, node, lower_of(node))

        nodes = [n for n in (snapshot.nodes[p] for p in potential.tolist()) if n is not None]
        wanted = cand.wanted_candidates(len(nodes), self.min_candidate_percentage,
                                        self.min_candidate_absolute)
        return cand.dry_run(simulate, nodes, self.offset(len(nodes)), wanted,
                            best_on if bounded else None)

    def _conditions(self) -> bool:
        cluster = self._handle.cluster
        return cluster is not None and cluster.pod_disruption_conditions()

    def _prepare(self, state: CycleState, pod: PodInfo, best: Candidate,
                 shown: str | None) -> Status:
        """Displace, nominate, and hand the API calls to the host (kube's
        ``prepareCandidateAsync`` and the nomination the scheduler then records)."""
        handle = self._handle
        cluster = handle.cluster
        if cluster is None:
            return error("preemption: no cluster to evict through")
        for placed in best.displaced:
            handle.clear_nomination(placed.info.pod_id)
        handle.nominate(pod, best.node, state.claim_on(best.room))
        self.started.record(pod.pod_id, Started(
            best.node, frozenset(v.info.pod_id for v in best.victims)))
        carrier = Carrier(cluster, pod, best.node,
                          scheduler_name=handle.config.scheduler_name, clock=handle.now)

        def calls() -> str | None:
            # Off the loop: the version look-up, the first time, too.
            failure = carrier.run(plan(pod, best, nominated=shown,
                                       conditions=cluster.pod_disruption_conditions()))
            if failure is not None:
                self.started.forget(pod.pod_id)
            return failure

        handle.preempt(pod, best.node, calls)
        return Status(Code.SUCCESS, (_under_way(best),))


def _under_way(best: Candidate) -> str:
    """The preemptor's side of the story, for its FailedScheduling summary."""
    if not best.victims:
        return (f"preemption: nominated to node {best.node}, taking the room held for "
                f"{len(best.displaced)} lower-priority pod(s).")
    names = ", ".join(v.info.key for v in best.victims[:5])
    more = f" and {len(best.victims) - 5} more" if len(best.victims) > 5 else ""
    return (f"preemption: evicting {len(best.victims)} lower-priority pod(s) on node "
            f"{best.node} ({names}{more}); the pod is nominated there.")
