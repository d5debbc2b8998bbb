"""The framework: one profile's plugins, sorted into extension points and run for one
pod at a time; and the Handle those plugins were built with.

``schedule`` is the scheduling algorithm (PreFilter → Filter → PreScore → Score →
NormalizeScore → select; which candidates it scores and how it filters them is
:mod:`~vgpu_scheduler.framework.search`, how many is :mod:`~vgpu_scheduler.framework.reach`);
around it are the points the host drives (PreEnqueue, the queue's
hints, Reserve, Permit, Bind) and the PreFilter extensions that plugins which simulate
(preemption) call. As kube-scheduler's ``frameworkImpl``, the framework is its plugins'
:class:`~vgpu_scheduler.framework.handle.Handle`: what the host lends it
(:class:`~vgpu_scheduler.framework.handle.Host`: the cluster, the watched objects, the
cache's nodes, the nominator, the waiting room at Permit) is reached through it. The
algorithm does no I/O and reads no clock: the time comes in the :class:`CycleState`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from vgpu.cluster.port import ClusterPort, Kind
from vgpu.codecs import Assignment
from vgpu.config import Config
from vgpu.errors import ConfigError
from vgpu_scheduler.framework import diagnosis as diag
from vgpu_scheduler.framework import interfaces as fw
from vgpu_scheduler.framework import reach
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Host, Lister, PodHandler, PreemptionCalls
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.schedule_result import PreFiltered, ScheduleResult
from vgpu_scheduler.framework.search import Scorer, Search
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, WAIT, Code, Status, error, unschedulable


class Framework:
    """One profile: its plugins sorted into extension points, with score weights; the
    plugins' Handle."""

    def __init__(self, plugins: Iterable[Any] = (), weights: Mapping[str, int] | None = None,
                 percentage_of_nodes_to_score: int = 0, *, host: Host | None = None) -> None:
        self._host = host or Host()
        #: kube-scheduler's percentageOfNodesToScore: 0 adapts to the cluster's size.
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.load(plugins, weights)

    def load(self, plugins: Iterable[Any], weights: Mapping[str, int] | None = None) -> None:
        """Sort ``plugins`` into the extension points. :func:`~vgpu_scheduler.framework.
        profile.build` calls it once the plugins, built with this framework as their
        handle, exist (kube's ``NewFramework`` fills its lists the same way)."""
        weights = weights or {}
        self.plugins = list(plugins)

        def having(proto: type) -> list[Any]:
            return [p for p in self.plugins if isinstance(p, proto)]

        sorts = having(fw.QueueSortPlugin)
        self.queue_sort: Any = sorts[0] if sorts else None
        self.pre_filters = having(fw.PreFilterPlugin)
        self.filters = having(fw.FilterPlugin)
        self.post_filters = having(fw.PostFilterPlugin)
        self.scorers = [
            Scorer(p, weights.get(p.name, 1), isinstance(p, fw.ScoreExtensions),
                   isinstance(p, fw.BulkScorePlugin),
                   isinstance(p, (fw.GpuPolicyPlugin, fw.GpuPolicyUser)))
            for p in having(fw.ScorePlugin)
        ]
        self.reservers = having(fw.ReservePlugin)
        self.permits = having(fw.PermitPlugin)
        self.pre_binds = having(fw.PreBindPlugin)
        self.binders = having(fw.BindPlugin)
        self.post_binds = having(fw.PostBindPlugin)
        self.tickers = having(fw.Ticker)
        self.pre_enqueues = having(fw.PreEnqueuePlugin)
        self._extensions = having(fw.PreFilterExtensions)
        self._hints = {p.name: p for p in having(fw.EnqueueExtensions)}
        self._diagnoser = diag.Diagnoser({p.name for p in having(fw.Explainer)})
        #: Where the next cycle's candidates start (kube's ``nextStartNodeIndex``).
        self.next_start = 0
        self._hand_out_gpu_policies(having(fw.GpuPolicyPlugin), having(fw.GpuPolicyUser))

    @staticmethod
    def _hand_out_gpu_policies(providers: list[Any], users: list[Any]) -> None:
        """The GPU choice policies the profile's plugins provide, given to the plugins that
        choose GPUs: each profile wires its own, so two schedulers in one process (a
        simulation beside a test) never see each other's plugins."""
        policies: dict[str, fw.GpuPolicy] = {}
        for plugin in providers:
            if plugin.gpu_policy in policies:
                raise ConfigError(f"scheduler.plugins: two plugins provide the GPU policy "
                                  f"{plugin.gpu_policy!r}")
            policies[plugin.gpu_policy] = plugin.rank_gpus
        for plugin in users:
            plugin.use_gpu_policies(policies)

    # -- the Handle: what the host lent the framework, as its plugins see it ---------------

    @property
    def config(self) -> Config:
        return self._host.config

    @property
    def cluster(self) -> ClusterPort | None:
        return self._host.cluster

    def now(self) -> float:
        return self._host.clock()

    def node_info(self, name: str) -> NodeInfo | None:
        return self._host.nodes.node_info(name)

    def lister(self, kind: Kind) -> Lister:
        return self._host.listers.lister(kind)

    def on_pod_event(self, handler: PodHandler) -> None:
        self._host.pod_events.on_pod_event(handler)

    def nominate(self, pod: PodInfo, node: str, claim: Assignment | None) -> None:
        self._host.nominator.nominate(pod, node, claim)

    def clear_nomination(self, pod_id: str) -> None:
        self._host.nominator.clear_nomination(pod_id)

    def preempt(self, pod: PodInfo, node: str, calls: PreemptionCalls) -> None:
        self._host.preemptions.start(pod, node, calls)

    def allow(self, pod_id: str, plugin: str) -> None:
        if self._host.waiting.allow(pod_id, plugin):
            self._host.wake()

    def reject(self, pod_id: str, plugin: str, reason: str) -> None:
        if self._host.waiting.reject(pod_id, f"{plugin}: {reason}"):
            self._host.wake()

    # -- queue support, for the host -------------------------------------------------------

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        if self.queue_sort is None:
            return (arrival,)
        key: tuple[Any, ...] = self.queue_sort.sort_key(pod, arrival)
        return key

    def could_help(self, pod: PodInfo, plugins: set[str], event: ClusterEvent) -> bool:
        """kube's QueueingHint: may ``event`` cure a pod rejected by ``plugins``?"""
        if not plugins:
            return True
        for name in plugins:
            plugin = self._hints.get(name)
            if plugin is None or plugin.could_help(pod, event):
                return True
        return False

    def columns(self) -> list[Column]:
        out: list[Column] = []
        for p in self.plugins:
            if isinstance(p, fw.Indexer):
                out.extend(p.columns())
        return out

    def tick(self, now: float) -> None:
        for p in self.tickers:
            p.tick(now)

    def pre_enqueue(self, pod: PodInfo) -> Status:
        """SUCCESS when every PreEnqueue plugin lets the pod into the active queue."""
        for plugin in self.pre_enqueues:
            status: Status = plugin.pre_enqueue(pod)
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return SUCCESS

    # -- scheduling algorithm --------------------------------------------------------------

    def schedule(self, pod: PodInfo, snapshot: Snapshot, now: float) -> ScheduleResult:
        state = CycleState(now, snapshot)
        pre = self._pre_filter(state, pod, snapshot)
        if isinstance(pre, Status):
            diagnosis = diag.Diagnosis(len(snapshot), pod_status=pre)
            if pre.rejected:
                pre = self._post_filter(state, pod, snapshot, diagnosis) or pre
            return ScheduleResult(None, state, pre, diagnosis)
        filters = [f for f in self.filters if f.name not in state.skip_filter]
        scorers = [s for s in self.scorers
                   if s.weight > 0 and s.plugin.name not in state.skip_score]
        count = reach.feasible_to_find(len(snapshot), self.percentage_of_nodes_to_score)
        positions = len(snapshot.nodes)
        start = self.next_start % positions if positions else 0
        found = Search(state, pod, snapshot, pre=pre, filters=filters,
                       scorers=scorers).run(start, count)
        if positions:
            self.next_start = (start + found.processed) % positions
        if found.node is None:
            diagnosis = self._diagnoser.diagnose(state, pod, snapshot, found.statuses, filters)
            failed = self._post_filter(state, pod, snapshot, diagnosis)
            return ScheduleResult(None, state, failed or unschedulable("no node fits"),
                                  diagnosis, found.evaluated, 0)
        return ScheduleResult(found.node.name, state, SUCCESS, None, found.evaluated,
                              found.scored)

    def _post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                     diagnosis: diag.Diagnosis) -> Status | None:
        """Run the PostFilter plugins until one succeeds (kube: it made room, typically by
        preemption); what the last one said goes into the diagnosis. Returns the ERROR a
        plugin ended with (the pod then backs off instead of parking), else None."""
        for plugin in self.post_filters:
            status: Status = plugin.post_filter(state, pod, snapshot, diagnosis)
            if status.message:
                diagnosis.post_filter_message = status.message
            if status.code is Code.SUCCESS:
                return None
            if status.code is Code.ERROR:
                return status.with_plugin(plugin.name)
        return None

    def _pre_filter(self, state: CycleState, pod: PodInfo,
                    snapshot: Snapshot) -> PreFiltered | Status:
        """Run every PreFilter: the nodes left and their order, or the pod's rejection."""
        pre = PreFiltered(snapshot.mask())
        for plugin in self.pre_filters:
            result: PreFilterResult | None
            status: Status
            result, status = plugin.pre_filter(state, pod, snapshot)
            if status.code is Code.SKIP:
                state.skip_filter.add(plugin.name)
                continue
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
            if result is None:
                continue
            if result.mask is not None:
                pre.mask &= result.mask[: len(pre.mask)]
            if result.node_names is not None:
                allowed = np.zeros(len(pre.mask), dtype=np.bool_)
                for name in result.node_names:
                    pos = snapshot.positions.get(name)
                    if pos is not None:
                        allowed[pos] = True
                pre.mask &= allowed
            if result.scores is not None and result.scores_for is not None:
                pre.scores[result.scores_for] = result.scores
            if result.would_wait is not None:
                pre.waits.append(result.would_wait)
        return pre

    # -- for plugins that simulate (preemption): the filters, the PreFilter extensions -----

    def run_filters(self, state: CycleState, pod: PodInfo, info: NodeInfo,
                    filters: Sequence[Any] | None = None) -> Status:
        return diag.run_filters(state, pod, info, self.filters if filters is None else filters)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        """PreFilterExtensions.remove_pod of every plugin whose PreFilter ran."""
        return self._each_extension(state, lambda p: p.remove_pod(state, pod, removed, node))

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        """PreFilterExtensions.add_pod of every plugin whose PreFilter ran."""
        return self._each_extension(state, lambda p: p.add_pod(state, pod, added, node))

    def _each_extension(self, state: CycleState, call: Callable[[Any], Status]) -> Status:
        for plugin in self._extensions:
            if plugin.name in state.skip_filter:
                continue
            status = call(plugin)
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return SUCCESS

    # -- reserve, permit, bind -------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        for plugin in self.reservers:
            status: Status = plugin.reserve(state, pod, node)
            if status.code is not Code.SUCCESS:
                self.unreserve(state, pod, node)
                return status.with_plugin(plugin.name)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for plugin in reversed(self.reservers):
            plugin.unreserve(state, pod, node)

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, set[str]]:
        """SUCCESS, a rejection, or WAIT with the plugins that must allow the pod."""
        waiting: set[str] = set()
        for plugin in self.permits:
            status: Status = plugin.permit(state, pod, node)
            if status.code is Code.WAIT:
                waiting.add(plugin.name)
            elif status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name), set()
        return (WAIT if waiting else SUCCESS), waiting

    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """PreBind, then the first Bind plugin that does not SKIP, then PostBind. A PreBind
        failure comes back in kube's words: ``running PreBind plugin "X": ...``."""
        for plugin in self.pre_binds:
            status: Status = plugin.pre_bind(state, pod, node)
            if status.code is not Code.SUCCESS:
                return Status(status.code, (f'running PreBind plugin "{plugin.name}": '
                                            f"{status.message}",), plugin.name)
        for plugin in self.binders:
            status = plugin.bind(state, pod, node)
            if status.code is Code.SKIP:
                continue
            if status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
            break
        else:
            return error("no bind plugin took the pod")
        for plugin in self.post_binds:
            plugin.post_bind(state, pod, node)
        return SUCCESS
