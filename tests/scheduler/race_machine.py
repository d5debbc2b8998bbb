"""The race harness: a hypothesis state machine driving the real Scheduler through the
interleavings a deployment meets (issue 31).

Each rule is one thing that can happen between two others: a scheduling attempt, one of
the scheduler's queued bindings going out, watch events reaching its informers, another
binder (a second replica, an old leader) binding a pod, a leader change, deletions and
same-name recreations (a StatefulSet), the kubelet confirming a pod gone, the node agent
allocating, a Binding refused or its answer lost, nodes and GPUs added, time passing. A
scheduling attempt can be interrupted just before Reserve by another actor, as a second
thread would. The invariants hold after every step; :meth:`RaceMachine.quiesce` lets
everything settle and checks that no pod is held forever or parked while it fits.

Profiles: ``VGPUDEV_RACES=ci`` (the default, a fixed set of runs within CI's budget) and
``VGPUDEV_RACES=long`` (random runs, many more and longer), see tests/scheduler/test_races.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import vgpu.annotations as ann
from tests.scheduler.helpers import FakeClock
from tests.scheduler.race_support import (
    LATE,
    LOST,
    REFUSED,
    LaggingCluster,
    QueuedBinder,
    bind_annotations,
    cache_view,
    check_watched_counted,
    claimed_usage,
    free_gpu,
    one_slice,
    over,
)
from vgpu import builders, meta
from vgpu.cluster.port import Obj
from vgpu.config import Config, SchedulerConfig
from vgpu.devices import Device, Usage, fit
from vgpu.pods import bind_phase, node_name, pod_id
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Status
from vgpu_scheduler.host.scheduler import Scheduler

NAMES = ("p", "q", "r", "s")
#: (MiB, % of compute): small, medium, large, whole; the last two fit only a 32 GiB GPU.
SHAPES = ((2000, 20), (6000, 30), (12000, 80), (16000, 100), (20000, 20), (30000, 50))
PRIORITIES = (0, 50, 100)
GPUS = {"t4": ("Tesla T4", 16384), "a100": ("NVIDIA A100-SXM4-32GB", 32768)}
INTERRUPTIONS = ("other-binder", "delete", "recreate", "deliver", "deliver-nodes")
CONFIG = Config(node_heartbeat_expiry_seconds=10**9, scheduler=SchedulerConfig(
    pod_max_unschedulable_seconds=300))
IN_DOUBT = CONFIG.scheduler.bind_in_doubt_seconds


class RaceMachine(RuleBasedStateMachine):
    #: Totals over every run in this process (reported by the test module).
    runs: ClassVar[int] = 0
    steps: ClassVar[int] = 0
    traces: ClassVar[set[tuple[str, ...]]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.cluster = LaggingCluster()
        self.cluster.now = lambda: self.clock.now
        self.gpus: dict[str, tuple[Device, ...]] = {}
        self.trace: list[str] = []
        self.leader_since = self.settled_since = 0
        self.nodes_added = 2
        for name in ("n0", "n1"):
            self._add_node(name, "t4")
        self.binder = QueuedBinder()
        self.sched = self._start()
        self.leader_since = len(self.trace)
        RaceMachine.runs += 1

    def _start(self) -> Scheduler:
        sched = Scheduler(CONFIG, self.cluster, clock=self.clock, binder=self.binder)
        sched.pump()  # lists what is there; watch events wait for the harness
        return sched

    def _add_node(self, name: str, kind: str, gpus: int = 1) -> None:
        model, mib = GPUS[kind]
        devices = builders.devices(name, gpus, model=model, memory_mib=mib)
        obj = builders.node(name, devices, heartbeat=self.clock.now)
        if name in self.gpus:
            self.cluster.replace("nodes", obj)
        else:
            self.cluster.create("nodes", obj)
        self.gpus[name] = devices

    def _note(self, step: str) -> None:
        self.trace.append(step)
        RaceMachine.steps += 1

    def teardown(self) -> None:
        RaceMachine.traces.add(tuple(self.trace))

    # -- the cluster's pods ----------------------------------------------------------------

    def _pod(self, name: str) -> Obj | None:
        for pod in self.cluster.pods():
            if meta.name(pod) == name:
                return pod
        return None

    # -- pods ------------------------------------------------------------------------------

    def _names(self, wanted: Callable[[Obj], bool]) -> list[str]:
        return sorted(meta.name(p) for p in self.cluster.pods() if wanted(p))

    def _some(self, data: st.DataObject, wanted: Callable[[Obj], bool]) -> str | None:
        names = self._names(wanted)
        return data.draw(st.sampled_from(names)) if names else None

    @initialize(binding_checks_uid=st.booleans())
    def begin(self, binding_checks_uid: bool = False) -> None:
        """The API server checks a Binding's uid (1.23 on) or not (1.20, the default)."""
        self.cluster.binding_checks_uid = binding_checks_uid
        self._note(f"begin, binding uid checked: {binding_checks_uid}")

    @precondition(lambda self: len(self.cluster.pods()) < len(NAMES))
    @rule(data=st.data(), shape=st.sampled_from(SHAPES), priority=st.sampled_from(PRIORITIES))
    def create(self, data: st.DataObject, shape: tuple[int, int], priority: int) -> None:
        taken = set(self._names(lambda p: True))
        name = data.draw(st.sampled_from([n for n in NAMES if n not in taken]))
        self.create_pod(name, shape, priority)

    # Pods come and go more often than the rest happens (hypothesis picks rules evenly).
    create_more = create

    def create_pod(self, name: str, shape: tuple[int, int], priority: int) -> None:
        self._note(f"create {name} {shape} {priority}")
        self.cluster.create("pods", builders.pod(
            name, [builders.container(gpumem=shape[0], cores=shape[1])], priority=priority))

    @precondition(lambda self: self.cluster.pods())
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        name = self._some(data, lambda p: True)
        if name is not None:
            self.delete_pod(name)

    def delete_pod(self, name: str) -> None:
        if self._pod(name) is None:
            return
        self._note(f"delete {name}")
        self.cluster.delete("pods", name, "default")

    @precondition(lambda self: any(meta.deleting(p) for p in self.cluster.pods()))
    @rule(data=st.data())
    def kubelet_removes(self, data: st.DataObject) -> None:
        name = self._some(data, meta.deleting)
        if name is not None:
            self.kubelet_removes_pod(name)

    def kubelet_removes_pod(self, name: str) -> None:
        self._note(f"kubelet removes {name}")
        self.cluster.remove(name)

    @precondition(lambda self: self.cluster.pods())
    @rule(data=st.data(), shape=st.sampled_from(SHAPES))
    def recreate(self, data: st.DataObject, shape: tuple[int, int]) -> None:
        name = self._some(data, lambda p: True)
        if name is not None:
            self.recreate_pod(name, shape)

    def recreate_pod(self, name: str, shape: tuple[int, int]) -> None:
        """A StatefulSet replaces its pod: the old one gone, a new one of the same name."""
        pod = self._pod(name)
        if pod is None:
            return
        self._note(f"recreate {name} {shape}")
        self.cluster.remove(name)
        self.cluster.create("pods", builders.pod(
            name, [builders.container(gpumem=shape[0], cores=shape[1])],
            priority=pod["spec"].get("priority")))

    @precondition(lambda self: self.cluster.pods())
    @rule(data=st.data())
    def finalizer_holds_deletion(self, data: st.DataObject) -> None:
        """A pending pod with a finalizer is deleted: it stays, with a deletionTimestamp."""
        name = self._some(data, self._is_pending)
        if name is None:
            return
        pod = self._pod(name)
        assert pod is not None
        self._note(f"deletion held by a finalizer {name}")
        pod["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
        self.cluster.replace("pods", pod)

    @precondition(lambda self: self.cluster.pods())
    @rule(data=st.data())
    def agent_allocates(self, data: st.DataObject) -> None:
        name = self._some(data, lambda p: bind_phase(p) == ann.PHASE_ALLOCATING)
        if name is not None:
            self.allocate(name)

    def allocate(self, name: str) -> None:
        self._note(f"agent allocates {name}")
        self.cluster.patch_annotations("pods", name, {ann.BIND_PHASE: ann.PHASE_SUCCESS},
                                       "default")

    @precondition(lambda self: self.cluster.pods())
    @rule(data=st.data())
    def other_binder(self, data: st.DataObject) -> None:
        name = self._some(data, self._is_pending)
        if name is not None:
            self.other_binds(name)

    @staticmethod
    def _is_pending(pod: Obj) -> bool:
        return node_name(pod) is None and not meta.deleting(pod)

    def other_binds(self, name: str, uid: str | None = None) -> None:
        """Another binder places a pending pod (of ``uid``, when given) where it fits in
        the cluster and in this scheduler's view alike, and this scheduler's watch shows
        it at once: its decision clashes with ours on that pod only. (Two binders that
        place different pods on one GPU, each before hearing of the other, over-commit
        it whatever either one's cache does: that is what leader election prevents.)"""
        pod = self._pod(name)
        if pod is None or not self._is_pending(pod) or uid not in (None, meta.uid(pod)):
            return
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        memory, cores = int(limits[CONFIG.resource_names.gpumem]), int(
            limits[CONFIG.resource_names.gpucores])
        device = free_gpu(self.gpus, [claimed_usage(self.cluster.pods()),
                                      cache_view(self.sched).staying], memory, cores)
        if device is None:
            return
        self._note(f"other binder binds {name}")
        assignment = one_slice(device, pod, memory, cores)
        self.cluster._bind("default", name, assignment.node, bind_annotations(assignment),
                           meta.uid(pod))
        self.deliver("pods", 1000)

    # -- the scheduler ---------------------------------------------------------------------

    @rule()
    def schedule(self) -> None:
        self._note("schedule")
        self.sched.schedule_one()

    schedule_more = schedule

    @rule(what=st.sampled_from(INTERRUPTIONS), shape=st.sampled_from(SHAPES))
    def schedule_interrupted(self, what: str, shape: tuple[int, int]) -> None:
        """An attempt during which, just before Reserve, another actor acts on its pod."""
        framework = self.sched.framework
        reserve = framework.reserve

        def interrupted(state: CycleState, pod: PodInfo, node: str) -> Status:
            del framework.reserve
            victim = pod.name
            self._note(f"  ...{what} {victim}")
            if what == "other-binder":
                self.other_binds(victim, pod.uid)
            elif what == "delete":
                self.delete_pod(victim)
            elif what == "recreate":
                self.recreate_pod(victim, shape)
            elif what == "deliver":
                self.deliver("pods", 10)
            else:
                self.deliver("nodes", 10)
            return reserve(state, pod, node)

        framework.reserve = interrupted  # type: ignore[method-assign]
        self._note(f"schedule, interrupted by {what}")
        try:
            self.sched.schedule_one()
        finally:
            framework.__dict__.pop("reserve", None)

    @precondition(lambda self: self.binder.tasks)
    @rule(index=st.integers(0, 3))
    def bind(self, index: int) -> None:
        if self.binder.tasks:
            self._note(f"binding {index % len(self.binder.tasks)} goes out")
            self.binder.run(index)

    bind_more = bind

    @rule(count=st.integers(1, 4))
    def deliver_pods(self, count: int) -> None:
        self.deliver("pods", count)

    deliver_more_pods = deliver_pods

    @rule()
    def deliver_nodes(self) -> None:
        self.deliver("nodes", 4)

    def deliver(self, kind: str, count: int) -> None:
        self._note(f"watch delivers {count} {kind} events")
        self.cluster.allowance[kind] = count
        self.sched.pump()
        self.cluster.allowance[kind] = 0

    @rule(failure=st.sampled_from((REFUSED, LOST, LATE)))
    def next_binding_fails(self, failure: str) -> None:
        self._note(f"next binding {failure}")
        self.cluster.fail_next_bind = failure

    @precondition(lambda self: bool(self.cluster.late))
    @rule(index=st.integers(0, 3))
    def late_binding_lands(self, index: int) -> None:
        self._note(self.cluster.land(index, IN_DOUBT))

    def _land_every_late_binding(self) -> None:
        while self.cluster.late:
            self._note(self.cluster.land(0, IN_DOUBT))

    @rule(seconds=st.sampled_from((1.0, 5.0, 31.0)))
    def tick(self, seconds: float) -> None:
        self._note(f"tick {seconds}")
        self.clock.advance(seconds)

    @precondition(lambda self: len(self.trace) - self.leader_since >= 10)
    @rule(drain=st.booleans())
    def leader_change(self, drain: bool) -> None:
        """A new leader lists and takes over; the old one's queued bindings went out
        before it stepped down (``drain``) or never did."""
        self._note(f"leader change, drain={drain}")
        while drain and self.binder.run(0):
            pass
        # A new leader's first write waits until the old one's can no longer land
        # (vgpu.cluster.leader.takeover_time): by then each has landed or never will.
        self._land_every_late_binding()
        self.binder = QueuedBinder()
        self.sched = self._start()

    @precondition(lambda self: len(self.gpus) < 4)
    @rule(kind=st.sampled_from(tuple(GPUS)))
    def add_node(self, kind: str) -> None:
        # A removed node's name is not taken again: pods bound to it stay bound to it.
        name = f"n{self.nodes_added}"
        self.nodes_added += 1
        self._note(f"add node {name} {kind}")
        self._add_node(name, kind)

    @rule(data=st.data())
    def add_gpu(self, data: st.DataObject) -> None:
        """A node's inventory grows by a GPU of the same kind (GPUs never shrink under
        pods: over-commit must be the scheduler's doing)."""
        name = data.draw(st.sampled_from(sorted(self.gpus)))
        devices = self.gpus[name]
        if len(devices) >= 2:
            return
        kind = next(k for k, (model, _) in GPUS.items() if model == devices[0].model)
        self._note(f"add a GPU to {name}")
        self._add_node(name, kind, len(devices) + 1)

    @precondition(lambda self: len(self.gpus) > 1)
    @rule(data=st.data())
    def remove_node(self, data: st.DataObject) -> None:
        """A node with nothing bound to it leaves the cluster."""
        name = data.draw(st.sampled_from(sorted(self.gpus)))
        if any(node_name(p) == name for p in self.cluster.pods()):
            return
        self._note(f"remove node {name}")
        del self.gpus[name]
        self.cluster.delete("nodes", name)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def no_gpu_over_committed(self) -> None:
        used = claimed_usage(self.cluster.pods())
        for devices in self.gpus.values():
            for device in devices:
                found = over(device, used.get(device.uuid, Usage()))
                assert found is None, f"GPU {device.uuid} is over-committed: {found}"

    @invariant()
    def every_bound_pod_counted_once(self) -> None:
        view = cache_view(self.sched)
        for devices in self.gpus.values():
            for device in devices:
                found = over(device, view.staying.get(device.uuid, Usage()))
                assert found is None, f"the cache hands out {device.uuid}: {found}"
        check_watched_counted(self.sched, view)

    @precondition(lambda self: len(self.trace) - self.settled_since >= 12)
    @rule()
    def quiesce(self) -> None:
        """Everything settles: events delivered, bindings out, pods allocated, terminating
        pods gone, backoffs and Permit waits over (not podMaxUnschedulableSeconds)."""
        self._note("quiesce")
        self.settled_since = len(self.trace)
        self.cluster.allowance = {"pods": None, "nodes": None}
        try:
            for _ in range(12):
                while self.binder.run(0):
                    pass
                self._land_every_late_binding()
                for pod in self.cluster.pods():
                    if meta.deleting(pod):
                        self.cluster.remove(meta.name(pod))
                    elif bind_phase(pod) == ann.PHASE_ALLOCATING:
                        self.allocate(meta.name(pod))
                self.sched.run_until_idle()
                self.clock.advance(CONFIG.scheduler.pod_max_backoff_seconds + 1)
            self.sched.run_until_idle()
            self._check_settled()
        finally:
            self.cluster.allowance = {"pods": 0, "nodes": 0}

    def _check_settled(self) -> None:
        sched = self.sched
        assert not self.binder.tasks, "bindings left after everything settled"
        assert not sched.waiting_pods(), f"pods held at Permit: {sched.waiting_pods()}"
        assert not sched.cache.assumed(), f"assumptions left: {sched.cache.assumed()}"
        counts = sched.queue.counts()
        assert counts["active"] == counts["backoff"] == 0, f"queue not settled: {counts}"
        view = cache_view(sched)
        parked = {qp.key for qp in sched.queue.unschedulable()}
        for pod in self.cluster.pods():
            if node_name(pod) is not None or meta.deleting(pod):
                continue
            key = pod_id(pod)
            assert key in sched.queue, f"pending pod {key} is nowhere in the queue"
            if key not in parked:
                continue
            limits = pod["spec"]["containers"][0]["resources"]["limits"]
            memory = int(limits[CONFIG.resource_names.gpumem])
            cores = int(limits[CONFIG.resource_names.gpucores])
            for devices in self.gpus.values():
                for device in devices:
                    assert fit(device, view.usages.get(device.uuid, Usage()), memory, cores,
                               1.0) is not None, (
                        f"pod {key} is parked although it fits {device.uuid}")
