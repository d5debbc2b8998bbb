"""Property: whatever happens, the scheduler never over-commits a GPU or a node, and every
pod ends bound or with a reason.

Random sequences of pod creations (various shapes), deletions, node additions and changes,
node-agent progress and time run through the full scheduler on the in-memory cluster; the
invariants are checked on the cluster's own objects (what the node agents would act on),
not on the scheduler's cache.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import vgpu.annotations as ann
from tests.scheduler.helpers import FakeClock
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu.devices import Device
from vgpu_scheduler.framework.compute import node_allocatable, pod_requests
from vgpu_scheduler.host.scheduler import Scheduler

MODELS = ("Tesla T4", "NVIDIA A100-SXM4-40GB")
SCALING = 1.5

container_st = st.fixed_dictionaries({
    "gpus": st.integers(1, 3),
    "memory": st.one_of(st.none(), st.integers(1, 24000).map(lambda m: ("mem", m)),
                        st.integers(1, 100).map(lambda p: ("pct", p))),
    "cores": st.one_of(st.none(), st.sampled_from([0, 10, 30, 50, 100]), st.integers(0, 100)),
    "cpu": st.sampled_from([None, "100m", "500m", "1", "2"]),
})
pod_st = st.fixed_dictionaries({
    "containers": st.lists(container_st, min_size=1, max_size=2),
    "cpu_only": st.booleans(),
    "nouse": st.sampled_from([None, "A100", "T4"]),
    "numa": st.booleans(),
    "gpu_policy": st.sampled_from([None, "binpack", "spread", "lowest-task-count"]),
    "node_policy": st.sampled_from([None, "binpack", "spread"]),
})
node_st = st.fixed_dictionaries({
    "gpus": st.integers(0, 4),
    "memory": st.sampled_from([8192, 16384, 40960]),
    "split": st.integers(1, 4),
    "model": st.sampled_from(MODELS),
    "cpu": st.sampled_from(["2", "4", "8"]),
    "pods": st.integers(2, 6),
})


class SchedulerMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.clock = FakeClock()
        self.cluster = MemoryCluster(copy_objects=False)
        self.config = Config(device_memory_scaling=SCALING)
        self.scheduler = Scheduler(self.config, self.cluster, clock=self.clock)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: list[str] = []
        self.counter = 0

    def _next(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def _node_obj(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        gpus = tuple(
            Device(f"GPU-{name}-{i}", i, spec["model"], spec["memory"], 100, spec["split"],
                   i % 2, healthy=i not in spec.get("sick", ()))
            for i in range(spec["gpus"]))
        return builders.node(name, gpus, cpu=spec["cpu"], pods=spec["pods"],
                          heartbeat=spec.get("heartbeat", self.clock.now),
                          unschedulable=spec.get("cordoned", False),
                          labels=spec.get("labels"))

    # -- nodes -----------------------------------------------------------------------------

    @rule(spec=node_st)
    def add_node(self, spec: dict[str, Any]) -> None:
        name = self._next("n")
        self.nodes[name] = dict(spec)
        self.cluster.create("nodes", self._node_obj(name, spec))

    @precondition(lambda self: self.nodes)
    @rule(data=st.data(), change=st.sampled_from(
        ["sick", "heal", "add-gpu", "cordon", "uncordon", "label", "more-cpu", "heartbeat"]))
    def change_node(self, data: st.DataObject, change: str) -> None:
        # Changes never shrink a GPU or a node: over-commit is the scheduler's doing only.
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        spec = self.nodes[name]
        if change == "sick" and spec["gpus"]:
            spec["sick"] = {*spec.get("sick", ()), data.draw(st.integers(0, spec["gpus"] - 1))}
        elif change == "heal":
            spec["sick"] = set()
        elif change == "add-gpu":
            spec["gpus"] += 1
        elif change in ("cordon", "uncordon"):
            spec["cordoned"] = change == "cordon"
        elif change == "label":
            spec["labels"] = {"step": str(self.counter)}
        elif change == "more-cpu":
            spec["cpu"] = str(int(spec["cpu"]) * 2)
        else:
            spec["heartbeat"] = self.clock.now
        self.cluster.replace("nodes", self._node_obj(name, spec))

    @precondition(lambda self: self.nodes)
    @rule(data=st.data())
    def delete_node(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        del self.nodes[name]
        self.cluster.delete("nodes", name)

    # -- pods ------------------------------------------------------------------------------

    @rule(spec=pod_st)
    def create_pod(self, spec: dict[str, Any]) -> None:
        name = self._next("p")
        containers = []
        for i, c in enumerate(spec["containers"]):
            kind, amount = c["memory"] if c["memory"] else (None, None)
            if spec["cpu_only"]:
                containers.append(builders.container(f"c{i}", gpus=None, cpu=c["cpu"] or "100m"))
                continue
            containers.append(builders.container(
                f"c{i}", gpus=c["gpus"], gpumem=amount if kind == "mem" else None,
                percent=amount if kind == "pct" else None, cores=c["cores"], cpu=c["cpu"]))
        annotations = {}
        if spec["nouse"]:
            annotations[ann.NOUSE_GPUTYPE] = spec["nouse"]
        if spec["numa"]:
            annotations[ann.NUMA_BIND] = "true"
        if spec["gpu_policy"]:
            annotations[ann.GPU_POLICY] = spec["gpu_policy"]
        if spec["node_policy"]:
            annotations[ann.NODE_POLICY] = spec["node_policy"]
        self.cluster.create("pods", builders.pod(name, containers, annotations=annotations))
        self.pods.append(name)

    @precondition(lambda self: self.pods)
    @rule(data=st.data())
    def delete_pod(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self.pods))
        self.pods.remove(name)
        self.cluster.delete("pods", name, "default")

    @rule(data=st.data(), phase=st.sampled_from([ann.PHASE_SUCCESS, ann.PHASE_FAILED]))
    def node_agent_allocates(self, data: st.DataObject, phase: str) -> None:
        allocating = [p["metadata"]["name"] for p in self.cluster.list("pods").items
                      if (p["metadata"].get("annotations") or {}).get(ann.BIND_PHASE)
                      == ann.PHASE_ALLOCATING]
        if allocating:
            name = data.draw(st.sampled_from(sorted(allocating)))
            self.cluster.patch_annotations("pods", name, {ann.BIND_PHASE: phase}, "default")

    @rule(seconds=st.sampled_from([0.0, 0.5, 1.0, 5.0, 31.0]))
    def schedule(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.scheduler.run_until_idle(max_attempts=200)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def nothing_is_over_committed(self) -> None:
        if not hasattr(self, "cluster"):
            return
        devices: dict[str, Device] = {}
        nodes: dict[str, tuple[int, int, int]] = {}
        for node in self.cluster.list("nodes").items:
            inventory = codecs.decode_inventory(
                node["metadata"]["annotations"][ann.NODE_GPUS]) if node["metadata"][
                "annotations"].get(ann.NODE_GPUS) else codecs.NodeInventory(())
            for d in inventory.devices:
                devices[d.uuid] = d
            alloc = node_allocatable(node)
            nodes[node["metadata"]["name"]] = (alloc.cpu, alloc.memory, alloc.pods)
        mem: dict[str, int] = defaultdict(int)
        cores: dict[str, list[int]] = defaultdict(list)
        used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for pod in self.cluster.list("pods").items:
            node = pod["spec"].get("nodeName")
            if not node or node not in nodes:
                continue
            requests = pod_requests(pod)
            used[node][0] += requests.cpu
            used[node][1] += requests.memory
            used[node][2] += 1
            raw = pod["metadata"]["annotations"].get(ann.ASSIGNMENT)
            if raw is None:
                continue
            assignment = codecs.decode_assignment(raw)
            assert assignment.node == node
            for granted in assignment.containers.values():
                assert len({g.uuid for g in granted}) == len(granted)
                for g in granted:
                    assert g.uuid.startswith(f"GPU-{node}-")
                    mem[g.uuid] += g.memory_mib
                    cores[g.uuid].append(g.cores)
        for uuid, d in devices.items():
            assert mem[uuid] <= math.floor(d.memory_mib * SCALING), uuid
            assert len(cores[uuid]) <= d.split, uuid
            assert sum(cores[uuid]) <= d.cores, uuid
            if any(c >= d.cores for c in cores[uuid]):
                assert len(cores[uuid]) == 1, f"{uuid} shared although exclusive"
        for node, (cpu, memory, pods) in used.items():
            alloc_cpu, alloc_mem, alloc_pods = nodes[node]
            assert cpu <= alloc_cpu and memory <= alloc_mem and pods <= alloc_pods, node

    def teardown(self) -> None:
        if not hasattr(self, "cluster"):
            return
        # Let everything settle: node agents report, backoffs run out, parked pods retry.
        for _ in range(4):
            for pod in self.cluster.list("pods").items:
                if (pod["metadata"].get("annotations") or {}).get(
                        ann.BIND_PHASE) == ann.PHASE_ALLOCATING:
                    self.cluster.patch_annotations("pods", pod["metadata"]["name"],
                                                   {ann.BIND_PHASE: ann.PHASE_SUCCESS},
                                                   "default")
            self.clock.advance(301)
            self.scheduler.run_until_idle(max_attempts=500)
        self.nothing_is_over_committed()
        waiting = self.scheduler.waiting_pods()
        for pod in self.cluster.list("pods").items:
            name = pod["metadata"]["name"]
            if pod["spec"].get("nodeName"):
                continue
            assert f"default/{name}" not in waiting, f"{name} still waiting at Permit"
            events = self.cluster.events(name=name, reason="FailedScheduling")
            assert events and events[-1].message, f"{name} is pending without a reason"


SchedulerMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestScheduler = SchedulerMachine.TestCase
