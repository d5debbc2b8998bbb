"""A replay over time: pods come and go at the trace's times, and the ones that fit nowhere
wait in the scheduler's own queue.

The scheduler runs on a fake clock that jumps from one moment that matters to the next:
a pod's ``creation_time`` (the pod is created), its ``deletion_time`` (deleted, placed or
not; a pod with no deletion time leaves when the trace ends), and the end of a backoff
the scheduler's queue set. Nothing in the replay retries a pod: a pod that fits nowhere is
parked by the queue as unschedulable and woken by the queue when a deletion frees GPU
(the cluster event and QueueingHint path a real cluster takes), after its backoff.

Two of the scheduler's settings change, both for the fake clock: the node heartbeats
never expire (no agent runs), and a parked pod is not retried after five minutes on its
own (that retry guards against lost watch events, which the in-memory cluster has none
of; over months of trace time it would retry every waiting pod every five minutes).

``capacity`` keeps a seeded random share of the nodes; ``load`` replays the list's pods
compressed and lapped until the nodes kept are offered that many times their GPUs
(:mod:`vgpu_simulate.load`), so that pods contend on the whole cluster.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import assignment_of
from vgpu.errors import ConfigError
from vgpu_scheduler.host.attempt_record import AttemptRecord
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_simulate import mapping
from vgpu_simulate.churn_fragments import Need, fits_empty
from vgpu_simulate.churn_ledger import Ledger, percentile
from vgpu_simulate.churn_plot import binned
from vgpu_simulate.gorand import GoRand
from vgpu_simulate.load import DEFAULT_WINDOW, Load, achieved, stream
from vgpu_simulate.policies import SimPolicy
from vgpu_simulate.replay import EPOCH, trace_shape
from vgpu_simulate.trace import MILLI, TraceError, TraceNode, TracePod

#: Longer than any trace: the heartbeat and the parked-pod retry never fire.
NEVER = 1e12

Progress = Callable[[int, int], None]

# Order of the changes at one instant: pods that ran go, then pods arrive, then pods that
# arrived and left at that instant go (each after the scheduler had its turn).
_LEAVE, _ARRIVE, _BLINK = 0, 1, 2


@dataclass(frozen=True)
class Wait:
    pod: str
    gpu_milli: int  # total, as asked
    arrived: float
    placed: float | None
    left: float

    @property
    def seconds(self) -> float:
        return (self.left if self.placed is None else self.placed) - self.arrived


@dataclass(frozen=True)
class ChurnResult:
    policy: str
    seed: int
    capacity: float
    nodes: int
    gpus: int
    pods: int
    gpu_pods: int
    placed: int
    #: GPU pods no node kept could hold even empty: they wait whatever the policy does, so
    #: they count in none of the wait figures.
    unfit: int
    never_placed: int  # GPU pods that fit an empty node
    waiting_gpu_seconds: float
    wait_mean: float
    wait_p95: float
    wait_max: float
    fragmented_idle_gpu_seconds: float
    allocated_gpu_seconds: float
    span: float
    seconds: float
    timeline: list[tuple[float, float, float]] = field(default_factory=list, repr=False)
    waits: list[Wait] = field(default_factory=list, repr=False)
    #: With ``--load``: how the stream was made, and the mean allocated GPUs over its
    #: window, over the cluster's GPUs.
    load: Load | None = None
    achieved_load: float | None = None

    @property
    def allocated_gpu_hours(self) -> float:
        return self.allocated_gpu_seconds / 3600

    def to_json(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("timeline", "waits", "load")}
        for key, value in out.items():
            if isinstance(value, float) and key not in ("capacity", "achieved_load"):
                out[key] = round(value, 2)
        if self.load is None:
            del out["achieved_load"]
        else:
            out["load"] = self.load.to_json()
            out["achieved_load"] = round(self.achieved_load or 0.0, 4)
        out["timeline"] = [[round(d, 5), a, p] for d, a, p in self.binned()]
        return out

    @property
    def horizon(self) -> float:
        """The seconds the plot shows: the whole trace, or twice a load's window (the
        same for every seed, so that seeds' bins line up)."""
        return self.span if self.load is None else 2 * self.load.window

    def binned(self) -> list[tuple[float, float, float]]:
        """``(day, allocated % of the GPUs, pending GPUs)``, time-weighted per bin."""
        return binned(self.timeline, self.horizon, self.gpus)


def sample_nodes(nodes: Sequence[TraceNode], capacity: float, seed: int) -> list[TraceNode]:
    """A seeded random ``capacity`` share of the nodes (at least one), in list order."""
    if not 0 < capacity <= 1:
        raise ConfigError(f"--capacity {capacity}: must be above 0 and at most 1")
    if capacity == 1:
        return list(nodes)
    keep = max(1, round(len(nodes) * capacity))
    chosen = set(random.Random(seed).sample(range(len(nodes)), keep))
    return [n for i, n in enumerate(nodes) if i in chosen]


def _events(pods: Sequence[TracePod]) -> tuple[list[tuple[float, int, int]], float]:
    missing = [p.name for p in pods if p.creation_time is None]
    if missing:
        raise TraceError(f"--churn needs each pod's creation_time; {len(missing)} pod(s) have "
                         f"none (first: {missing[0]})")
    end = max(max(p.deletion_time or 0, p.creation_time or 0) for p in pods)
    out: list[tuple[float, int, int]] = []
    for i, p in enumerate(pods):
        born = p.creation_time or 0
        gone = end if p.deletion_time is None else max(p.deletion_time, born)
        out.append((born, _ARRIVE, i))
        out.append((gone, _LEAVE if gone > born else _BLINK, i))
    out.sort()
    return out, end


def churn(nodes: Sequence[TraceNode], pods: Sequence[TracePod], policy: SimPolicy, *,
          seed: int, capacity: float = 1.0, load: float | None = None,
          window: float = DEFAULT_WINDOW, progress: Progress | None = None) -> ChurnResult:
    started = time.perf_counter()
    chosen = sample_nodes(nodes, capacity, seed)
    if not any(n.gpus for n in chosen):
        raise TraceError("the nodes kept have no GPUs; nothing to measure (raise --capacity)")
    made: Load | None = None
    if load is not None:
        pods, made = stream(pods, sum(n.gpus for n in chosen), load=load, window=window,
                            seed=seed)
    order = sorted(pods, key=lambda p: ((p.creation_time or 0), p.name.encode()))
    events, end = _events(order)
    rng = GoRand(seed)
    base = policy.config()
    config = dataclasses.replace(
        base, node_heartbeat_expiry_seconds=NEVER,
        scheduler=dataclasses.replace(base.scheduler, pod_max_unschedulable_seconds=NEVER))
    cluster = MemoryCluster(copy_objects=False)
    perm = rng.perm(len(chosen))
    for i in sorted(range(len(chosen)), key=lambda i: perm[i]):
        cluster.create("nodes", mapping.node_object(chosen[i], EPOCH))
    now = [EPOCH]
    sched = Scheduler(config, cluster, clock=lambda: now[0],
                      registry=policy.registry([trace_shape(p) for p in pods], rng))
    by_key = {f"{mapping.NAMESPACE}/{p.name}": p for p in order}
    ledger = Ledger(chosen, start=EPOCH)
    arrived: dict[str, float] = {}
    placed: dict[str, float] = {}
    waits: list[Wait] = []

    def listen(record: AttemptRecord) -> None:
        if record.outcome != "bound":
            return
        pod = by_key[record.pod]
        placed[pod.name] = now[0]
        if pod.num_gpu:
            obj = cluster.get("pods", pod.name, mapping.NAMESPACE)
            ledger.place(pod, assignment_of(obj))
        else:
            ledger.place_on(pod, record.node or "")

    sched.listeners.append(listen)
    sched.run_until_idle()

    def settle(until: float) -> None:
        """Let the queue's backoffs that end before ``until`` run out, one by one."""
        while True:
            due = sched.queue.next_backoff()
            if due is None or due >= until:
                return
            ledger.advance(due)
            now[0] = due
            sched.run_until_idle()

    for done, (at, kind, index) in enumerate(events):
        pod = order[index]
        moment = EPOCH + at
        if moment > now[0]:
            settle(moment)
            ledger.advance(moment)
            now[0] = moment
        if kind == _ARRIVE:
            arrived[pod.name] = moment
            ledger.arrive(pod)
            obj = mapping.pod_object(pod, config)
            # Created now on the replay's clock, as the API server would stamp it: what a
            # NodeReservation's wait counts from.
            obj["metadata"]["creationTimestamp"] = _stamp(moment)
            cluster.create("pods", obj)
        else:
            if pod.num_gpu:
                waits.append(Wait(pod.name, pod.total_gpu_milli, arrived[pod.name] - EPOCH,
                                  None if pod.name not in placed
                                  else placed[pod.name] - EPOCH, moment - EPOCH))
            ledger.leave(pod.name)
            cluster.delete("pods", pod.name, mapping.NAMESPACE)
        last = done + 1 == len(events)
        if last or events[done + 1][:2] != (at, kind):
            sched.run_until_idle()
        if progress is not None:
            progress(done + 1, len(events))
    ledger.advance(EPOCH + end)
    result = _result(policy, seed, capacity=capacity, nodes=chosen, pods=order, placed=placed,
                     waits=waits, ledger=ledger, end=end,
                     seconds=time.perf_counter() - started)
    if made is None:
        return result
    return dataclasses.replace(result, load=made, achieved_load=achieved(
        ledger.timeline, made.window, result.gpus))


def _stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _result(policy: SimPolicy, seed: int, *, capacity: float, nodes: Sequence[TraceNode],
            pods: Sequence[TracePod], placed: dict[str, float], waits: list[Wait],
            ledger: Ledger, end: float, seconds: float) -> ChurnResult:
    # Per shape, not per pod: a load's laps repeat the list's shapes many times over.
    fits: dict[Need, bool] = {}
    for p in pods:
        if p.num_gpu and (need := Need.of(p)) not in fits:
            fits[need] = any(fits_empty(n, need) for n in nodes)
    unfit = {p.name for p in pods if p.num_gpu and not fits[Need.of(p)]}
    fit = [w for w in waits if w.pod not in unfit]
    spans = [w.seconds for w in fit]
    return ChurnResult(
        policy=policy.name, seed=seed, capacity=capacity, nodes=len(nodes),
        gpus=sum(n.gpus for n in nodes), pods=len(pods), gpu_pods=len(waits),
        placed=len(placed), unfit=len(unfit),
        never_placed=sum(1 for w in fit if w.placed is None),
        waiting_gpu_seconds=sum(w.gpu_milli * w.seconds for w in fit) / MILLI,
        wait_mean=sum(spans) / len(spans) if spans else 0.0,
        wait_p95=percentile(spans, 95), wait_max=max(spans, default=0.0),
        fragmented_idle_gpu_seconds=ledger.fragmented_gpu_seconds,
        allocated_gpu_seconds=ledger.allocated_gpu_seconds, span=float(end), seconds=seconds,
        timeline=ledger.timeline, waits=waits)
