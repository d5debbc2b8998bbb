"""How far the scheduler looks: kube-scheduler's number of feasible nodes to find, the
window of candidates from a start that rotates, and what that reach does for soft rules
at upstream's scale (scheduler_perf's preferred pod anti-affinity workload, 500 nodes)."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

from tests.scheduler.helpers import FakeClock
from tests.scheduler.test_framework import NOW, Recorder, a_pod, snapshot_of
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu_scheduler.framework import reach
from vgpu_scheduler.framework.runtime import Framework
from vgpu_scheduler.host.scheduler import Scheduler


# kube-scheduler's TestNumFeasibleNodesToFind, then the cases of the adaptive formula's
# edges and of a profile's percentage (schedule_one_test.go).
@pytest.mark.parametrize(("percentage", "nodes", "expected"), [
    (0, 10, 10),
    (40, 10, 10),
    (0, 1000, 420),
    (40, 1000, 400),
    (0, 6000, 300),
    (40, 6000, 2400),
    (0, 2000, 680),
    (10, 2000, 200),
    (5, 2000, 100),
    (100, 2000, 2000),
    (0, 99, 99),
    (0, 100, 100),
    (0, 500, 230),
    (0, 5000, 500),
    (0, 5625, 281),
    (0, 15000, 750),
    (1, 500, 100),
    (0, 0, 0),
])
def test_feasible_nodes_to_find_is_kube_schedulers(percentage: int, nodes: int,
                                                   expected: int) -> None:
    assert reach.feasible_to_find(nodes, percentage) == expected


@pytest.mark.parametrize(("mask", "start", "count", "positions", "processed"), [
    # Every position kept: the next ``count`` from the start, wrapping round.
    ("11111111", 0, 3, [0, 1, 2], 3),
    ("11111111", 6, 3, [6, 7, 0], 3),
    # Masked-out positions are skipped but count as looked at.
    ("10011011", 1, 3, [3, 4, 6], 6),
    ("10011011", 5, 3, [6, 7, 0], 4),
    # As many kept as sought: the search stops at the last (kube's cancel).
    ("01101000", 6, 3, [1, 2, 4], 7),
    # Fewer kept than sought: all of them, and the start comes back where it was.
    ("01000100", 3, 5, [5, 1], 8),
    ("00000000", 3, 5, [], 8),
    # A start past the end (the cluster shrank) wraps.
    ("1111", 9, 2, [1, 2], 2),
])
def test_window_from_a_rotating_start(mask: str, start: int, count: int,
                                      positions: list[int], processed: int) -> None:
    kept = np.array([c == "1" for c in mask], dtype=np.bool_)
    got, moved = reach.window(kept, start, count)
    assert (got.tolist(), moved) == (positions, processed)


def test_successive_windows_visit_every_node() -> None:
    rng = np.random.default_rng(3)
    kept = rng.random(997) < 0.7
    start, seen = 0, np.zeros(len(kept), dtype=np.bool_)
    for _ in range(10):
        got, moved = reach.window(kept, start, 150)
        seen[got] = True
        start = (start + moved) % len(kept)
    assert seen.tolist() == kept.tolist()


def test_the_framework_scores_kube_schedulers_count_from_a_rotating_start() -> None:
    # 150 nodes at 10 %: kube-scheduler finds max(15, 100) = 100 feasible nodes, starting
    # where the last cycle stopped, and scores those; a node-by-node scorer is filtered
    # one by one, as kube-scheduler does.
    calls: list[str] = []
    a = Recorder("A", calls)
    names = [f"n{i:03d}" for i in range(150)]
    a.scores = {"n120": 100, "n010": 50}
    snap = snapshot_of(names)
    fw = Framework([a], percentage_of_nodes_to_score=10)
    first = fw.schedule(a_pod(), snap, NOW)
    assert (first.evaluated, first.feasible, first.node) == (100, 100, "n010")
    assert fw.next_start == 100
    second = fw.schedule(a_pod(), snap, NOW)
    # n100..n149 then n000..n049: n120 is a candidate now.
    assert (second.evaluated, second.node) == (100, "n120")
    assert fw.next_start == 50
    full = Framework([a], percentage_of_nodes_to_score=100).schedule(a_pod(), snap, NOW)
    assert (full.evaluated, full.feasible, full.node) == (150, 150, "n120")


# -- upstream's preferred anti-affinity workload, in process ------------------------------

ANTI = {"weight": 1, "podAffinityTerm": {
    "labelSelector": {"matchLabels": {"color": "red"}},
    "topologyKey": "kubernetes.io/hostname", "namespaces": ["sched-0", "sched-1"]}}


def _red_pod(name: str, namespace: str) -> dict[str, Any]:
    pod = builders.pod(name, [builders.container(gpus=1, gpumem=1000, cpu="100m",
                                                 memory="500Mi")], namespace=namespace)
    pod["metadata"]["labels"] = {"color": "red"}
    pod["spec"]["affinity"] = {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [ANTI]}}
    return pod


def test_preferred_anti_affinity_spreads_at_500_nodes() -> None:
    """scheduler_perf's SchedulingPreferredPodAntiAffinity at 500 nodes, every pod a GPU
    pod: 500 pods, then 1,000 more, each preferring (weight 1) no other on its node.
    kube-scheduler v1.20.2 put at most 4 on one node; before the scheduler looked past
    the 64 fullest nodes, vgpu put up to 24 on one of 64 nodes. The GPU policy (binpack)
    must not outvote the preference."""
    clock = FakeClock()
    cluster = MemoryCluster(copy_objects=False)
    for i in range(500):
        name = f"node-{i:03d}"
        cluster.create("nodes", builders.node(
            name, builders.devices(name, 8, memory_mib=16384), cpu="4", memory="32Gi",
            heartbeat=clock.now))
    plugins = tuple(p for p in SchedulerConfig().plugins if p != "AllocationGate")
    scheduler = Scheduler(Config(scheduler=SchedulerConfig(plugins=plugins)), cluster,
                          clock=clock)
    for namespace, count in (("sched-0", 500), ("sched-1", 1000)):
        for k in range(count):
            cluster.create("pods", _red_pod(f"p-{k}", namespace))
        scheduler.run_until_idle()
    per_node = collections.Counter(p["spec"].get("nodeName")
                                   for p in cluster.list("pods").items)
    assert None not in per_node
    assert max(per_node.values()) <= 4, sorted(collections.Counter(per_node.values()).items())
