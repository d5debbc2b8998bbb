"""The search for a pod's node: counting candidates on the PreFilter masks and filtering
only the node about to be picked decides as kube-scheduler's way, filtering nodes one by
one from the rotating start until enough fit, wherever the masks are exact; a GPU policy
is one score among the soft rules; a node where the pod would wait at Permit loses its
GPU placement score and nothing else."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import FakeClock
from vgpu import annotations as ann
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu_scheduler.framework import reach
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.diagnosis import run_filters
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.runtime import Framework
from vgpu_scheduler.framework.schedule_result import PreFiltered
from vgpu_scheduler.framework.search import Found, Search, pick
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.host.scheduler import Scheduler

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _cluster(rng: random.Random, clock: FakeClock) -> MemoryCluster:
    cluster = MemoryCluster(copy_objects=False)
    nodes = rng.randint(105, 140)
    for i in range(nodes):
        name = f"n{i:03d}"
        labels = {ZONE: f"z{rng.randrange(3)}"}
        if rng.random() < 0.5:
            labels["disk"] = rng.choice(["ssd", "hdd"])
        taints = [{"key": "spare", "effect": "PreferNoSchedule"}] if rng.random() < 0.1 \
            else []
        if rng.random() < 0.05:
            taints.append({"key": "infra", "effect": "NoSchedule"})
        cluster.create("nodes", builders.node(
            name, builders.devices(name, rng.randint(1, 4), memory_mib=16384),
            heartbeat=clock.now, labels=labels, taints=taints,
            unschedulable=rng.random() < 0.03))
    for k in range(rng.randint(0, 300)):
        pod = builders.pod(f"e{k}", [builders.container(gpus=None, cpu="100m")],
                           nodeName=f"n{rng.randrange(nodes):03d}")
        pod["metadata"]["labels"] = {"app": rng.choice("ab")}
        if rng.random() < 0.2:
            pod["spec"]["affinity"] = {"podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [_term(rng, "a")]}}
        cluster.create("pods", pod)
    return cluster


def _term(rng: random.Random, app: str) -> dict[str, Any]:
    return {"weight": rng.randint(1, 100), "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"app": app}},
        "topologyKey": rng.choice([HOST, ZONE])}}


def _new_pod(rng: random.Random) -> dict[str, Any]:
    policy = {ann.NODE_POLICY: rng.choice(["binpack", "spread"])}
    pod = builders.pod("new", [builders.container(gpus=1, gpumem=rng.choice([1000, 9000]))],
                       annotations=policy)
    pod["metadata"]["labels"] = {"app": "a"}
    affinity: dict[str, Any] = {}
    if rng.random() < 0.6:
        affinity["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [_term(rng, "a")]}
    if rng.random() < 0.4:
        affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": rng.randint(1, 100), "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}
    if rng.random() < 0.3:
        affinity["nodeAffinity"] = {**affinity.get("nodeAffinity", {}),
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                        "nodeSelectorTerms": [{"matchExpressions": [
                                            {"key": ZONE, "operator": "NotIn",
                                             "values": ["z2"]}]}]}}
    if affinity:
        pod["spec"]["affinity"] = affinity
    if rng.random() < 0.4:
        pod["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "a"}}}]
    if rng.random() < 0.3:
        pod["spec"]["tolerations"] = [{"key": "spare", "operator": "Exists"}]
    return pod


def _search(fw: Framework, snap: Snapshot, pod: Any, now: float) -> tuple[Search, int]:
    state = CycleState(now, snap)
    pre = fw._pre_filter(state, pod, snap)
    assert isinstance(pre, PreFiltered)
    filters = [f for f in fw.filters if f.name not in state.skip_filter]
    scorers = [s for s in fw.scorers if s.weight > 0 and s.plugin.name not in state.skip_score]
    count = reach.feasible_to_find(len(snap), fw.percentage_of_nodes_to_score)
    return Search(state, pod, snap, pre=pre, filters=filters, scorers=scorers), count


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_counting_on_exact_masks_picks_as_filtering_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock()
    cluster = _cluster(rng, clock)
    scheduler = Scheduler(Config(), cluster, clock=clock)
    scheduler.pump()
    snap = scheduler.snapshot
    scheduler.cache.update_snapshot(snap)
    fw = scheduler.framework
    pod = parse(_new_pod(rng), Config())
    start = rng.randrange(len(snap.nodes))
    on_masks, count = _search(fw, snap, pod, clock.now)
    # The masks are exact for this pod: every node they keep passes the filters.
    kept = np.flatnonzero(on_masks.pre.mask).tolist()
    assume(all(run_filters(on_masks.state, pod, snap.nodes[p], on_masks.filters).code  # type: ignore[arg-type]
               is Code.SUCCESS for p in kept))
    one_by_one, _ = _search(fw, snap, pod, clock.now)
    one_by_one._one_by_one(start, count)
    got: Found = on_masks.run(start, count)
    want = one_by_one.found
    assert (None if got.node is None else got.node.name) == (
        None if want.node is None else want.node.name)
    assert got.processed == want.processed
    assert got.scored == want.scored == min(count, len(kept))
    # Only the pick was filtered.
    assert got.evaluated <= 1


def test_ties_go_to_the_placement_policy_then_to_the_lowest_rank() -> None:
    totals = np.array([5.0, 7.0, 7.0, 7.0])
    first = np.arange(4, dtype=np.int64)
    assert pick(totals, None, first) == 1
    assert pick(totals, None, np.array([0, 9, 4, 2], dtype=np.int64)) == 3
    assert pick(totals, np.array([9.0, 1.0, 3.0, 3.0]), first) == 2
    assert pick(totals, np.array([9.0, 1.0, 3.0, 3.0]), np.array([0, 0, 5, 1])) == 3
    assert pick(np.array([-np.inf, 2.0, 2.0]), np.array([0.0, np.nan, np.nan]), first[:3]) == 1


def test_ties_fill_nodes_in_snapshot_order() -> None:
    """Alike nodes, every one scored: a CPU-only pod (nothing ranks it) and a GPU pod
    (binpack) each go to the first node until it is full, then the next (kube-scheduler
    draws at random among equal nodes)."""
    clock = FakeClock()
    cluster = MemoryCluster()
    for i in range(3):
        cluster.create("nodes", builders.node(f"n{i}", builders.devices(f"n{i}", 1),
                                              cpu="4", heartbeat=clock.now))
    scheduler = Scheduler(Config(), cluster, clock=clock)
    for k in range(3):
        cluster.create("pods", builders.pod(f"cpu-{k}", [builders.container(gpus=None,
                                                                             cpu="2")]))
        scheduler.run_until_idle()
    for k in range(2):
        cluster.create("pods", builders.pod(f"gpu-{k}", [builders.container(gpumem=1000,
                                                                             cpu="1")]))
        scheduler.run_until_idle()

    def node(name: str) -> str:
        found: str = cluster.get("pods", name, "default")["spec"]["nodeName"]
        return found

    assert [node(f"cpu-{k}") for k in range(3)] == ["n0", "n0", "n1"]
    # n1 and n2 tie for the first (their GPUs alike and idle); binpack then fills n1.
    assert [node(f"gpu-{k}") for k in range(2)] == ["n1", "n1"]
