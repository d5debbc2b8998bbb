"""A small world for the preemption tests: nodes, placed pods and budgets on the in-memory
cluster, a real scheduler over it, and the DefaultPreemption plugin of its profile.

kube-scheduler's DefaultPreemption tests run the plugin against a snapshot built from
pods and nodes, with the plugins a case needs; so do these, through the real host (cache,
snapshot, listers) rather than fakes. Resources are kube's test sizes: CPU in millicores,
memory in bytes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.scheduler.helpers import FakeClock
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config, SchedulerConfig
from vgpu_scheduler.framework import podinfo
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Code, Status
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.kube.default_preemption import DefaultPreemption
from vgpu_scheduler.plugins.kube.default_preemption.candidates import Positions, pick_one
from vgpu_scheduler.plugins.kube.default_preemption.victims import Candidate
from vgpu_scheduler.plugins.registry import REGISTRY

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = ("100m", "100")
MEDIUM = ("200m", "200")
LARGE = ("300m", "300")
VERY_LARGE = ("500m", "500")
EPOCH = 1_700_000_000.0

PROFILE = ("PrioritySort", "NodeResourcesFit", "VGPU", "DefaultPreemption", "VGPUBinder")


def iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, res: tuple[str, str] = VERY_LARGE, *, pods: int = 110,
         labels: Mapping[str, str] | None = None) -> Obj:
    return builders.node(name, cpu=res[0], memory=res[1], pods=pods, labels=labels)


def pod(name: str, priority: int = LOW, res: tuple[str, str] | None = None, *,
        on: str | None = None, start: float | None = None,
        labels: Mapping[str, str] | None = None, **spec: Any) -> Obj:
    """A pod asking for ``res`` (CPU, memory); with ``on`` it is bound there and running
    (since ``start``, seconds after EPOCH), else it is pending for vgpu-scheduler."""
    container = builders.container(gpus=None, cpu=res[0] if res else None,
                                   memory=res[1] if res else None)
    obj = builders.pod(name, [container], priority=priority,
                       scheduler_name="vgpu-scheduler" if on is None else "default-scheduler",
                       **spec)
    obj["metadata"]["labels"] = dict(labels or {})
    if on is not None:
        obj["spec"]["nodeName"] = on
        obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready",
                                                             "status": "True"}]}
        if start is not None:
            obj["status"]["startTime"] = iso(EPOCH + start)
    return obj


def budget(name: str, labels: Mapping[str, str], allowed: int,
           disrupted: Iterable[str] = ()) -> Obj:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": dict(labels)}},
            "status": {"disruptionsAllowed": allowed,
                       "disruptedPods": {n: iso(EPOCH) for n in disrupted}}}


class World:
    def __init__(self, nodes: Sequence[Obj], pods: Sequence[Obj] = (),
                 budgets: Sequence[Obj] = (), *, plugins: Sequence[str] = PROFILE,
                 registry: Mapping[str, Any] = REGISTRY,
                 cluster: MemoryCluster | None = None) -> None:
        self.cluster = cluster or MemoryCluster()
        for obj in nodes:
            self.cluster.create("nodes", obj)
        for obj in pods:
            self.cluster.create("pods", obj)
        for obj in budgets:
            self.cluster.create("poddisruptionbudgets", obj)
        self.clock = FakeClock()
        self.config = Config(scheduler=SchedulerConfig(plugins=tuple(plugins)))
        self.sched = Scheduler(self.config, self.cluster, clock=self.clock, registry=registry)
        self.sched.pump()
        self.sched.cache.update_snapshot(self.sched.snapshot)
        found = [p for p in self.sched.framework.plugins if isinstance(p, DefaultPreemption)]
        self.plugin: DefaultPreemption = found[0]

    def prepare(self, obj: Obj) -> tuple[PodInfo, CycleState]:
        """The preemptor, known to the cluster (as kube's tests put it in the informer),
        and a cycle state its PreFilters wrote."""
        if not any(p["metadata"]["name"] == obj["metadata"]["name"]
                   for p in self.cluster.list("pods").items):
            self.cluster.create("pods", obj)
        self.sched.pump()
        self.sched.cache.update_snapshot(self.sched.snapshot)
        info = podinfo.parse(obj, self.config)
        state = CycleState(self.clock(), self.sched.snapshot)
        # The framework's own PreFilter step, without the rest of a scheduling attempt.
        pre = self.sched.framework._pre_filter(state, info, self.sched.snapshot)
        assert not isinstance(pre, Status), pre
        return info, state

    def positions(self, names: Iterable[str] | None = None) -> Positions:
        import numpy as np

        snapshot = self.sched.snapshot
        wanted = list(names) if names is not None else [n.name for n in snapshot]
        return np.array(sorted(snapshot.positions[n] for n in wanted), dtype=np.int64)

    def candidates(self, obj: Obj, *, offset: int | None = None,
                   nodes: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Node → victim names, as kube's DryRunPreemption tests compare them."""
        found = self.dry_run(obj, offset=offset, nodes=nodes)[0]
        return {c.node: sorted(v.info.name for v in c.victims) for c in found}

    def dry_run(self, obj: Obj, *, offset: int | None = None,
                nodes: Iterable[str] | None = None,
                ) -> tuple[list[Candidate], dict[str, Status]]:
        info, state = self.prepare(obj)
        if offset is not None:
            self.plugin.offset = lambda n: offset
        # Every candidate with its victims, as kube's DryRunPreemption lists them.
        return self.plugin.find_candidates(state, info, self.sched.snapshot,
                                           self.positions(nodes), every=True)

    def best(self, obj: Obj) -> Candidate:
        return pick_one(self.dry_run(obj)[0])

    def post_filter(self, obj: Obj, statuses: Mapping[str, Status],
                    groups: Sequence[tuple[Status, int]] = ()) -> Status:
        """PostFilter with the filters' verdicts given, as kube's tests give them."""
        info, state = self.prepare(obj)
        diagnosis = Diagnosis(len(self.sched.snapshot), dict(statuses), groups=list(groups))
        status = self.plugin.post_filter(state, info, self.sched.snapshot, diagnosis)
        # What the attempt does once it is over: the preemption's API calls (inline here).
        self.sched.preemptions.submit()
        return status

    def names(self) -> set[str]:
        return {p["metadata"]["name"] for p in self.cluster.list("pods").items}

    def nominated(self, name: str) -> str | None:
        found: str | None = (self.cluster.get("pods", name, "default").get("status") or {}
                             ).get("nominatedNodeName")
        return found


def rejected(*names: str, code: Code = Code.UNSCHEDULABLE) -> dict[str, Status]:
    return {n: Status(code) for n in names}
