"""Bulk failure explanations agree with the filters, node for node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vgpu.annotations as ann
from tests.scheduler.helpers import FakeClock, FakeHandle
from vgpu import builders
from vgpu.config import Config
from vgpu.devices import Device
from vgpu.isolation_modes import REQUIRE_ANNOTATION
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.diagnosis import summarize
from vgpu_scheduler.framework.interfaces import Explainer
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.registry import REGISTRY

NOW = FakeClock().now

gpu_st = st.fixed_dictionaries({
    "model": st.sampled_from(["Tesla T4", "NVIDIA A100-SXM4-40GB"]),
    "memory": st.sampled_from([1000, 16384]),
    "split": st.integers(1, 3),
    "cores": st.sampled_from([100, 50]),
    "healthy": st.booleans(),
    "used": st.lists(st.tuples(st.integers(0, 9000), st.sampled_from([0, 10, 50, 100])),
                     max_size=3),
})
node_st = st.fixed_dictionaries({
    "gpus": st.lists(gpu_st, max_size=9),
    "heartbeat": st.sampled_from([NOW, NOW - 1000, None]),
    "cordoned": st.booleans(),
    "tainted": st.booleans(),
    "cpu": st.sampled_from(["1", "4"]),
    "broken": st.booleans(),
})
pod_st = st.fixed_dictionaries({
    "gpus": st.one_of(st.none(), st.integers(1, 3)),
    "memory": st.one_of(st.none(), st.integers(1, 17000)),
    "percent": st.one_of(st.none(), st.integers(1, 100)),
    "cores": st.one_of(st.none(), st.sampled_from([0, 30, 50, 100])),
    "cpu": st.sampled_from([None, "2"]),
    "nouse": st.sampled_from([None, "A100"]),
    "tolerate": st.booleans(),
    # IsolationRequired: not asked, asked (no node enforces here), unreadable.
    "isolation": st.sampled_from([None, "true", "maybe"]),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(node_st, min_size=1, max_size=6), spec=pod_st)
def test_explanations_match_filters(nodes: list[dict[str, Any]], spec: dict[str, Any]) -> None:
    sched = Scheduler(Config(), None, clock=FakeClock())
    for i, n in enumerate(nodes):
        name = f"n{i}"
        devices = tuple(Device(f"GPU-{name}-{j}", j, g["model"], g["memory"], g["cores"],
                               g["split"], j % 2, g["healthy"])
                        for j, g in enumerate(n["gpus"]))
        obj = builders.node(name, devices, cpu=n["cpu"], heartbeat=n["heartbeat"],
                         unschedulable=n["cordoned"],
                         taints=[{"key": "k", "effect": "NoSchedule"}] if n["tainted"] else ())
        if n["broken"]:
            obj["metadata"]["annotations"][ann.NODE_GPUS] = "{"
        sched.on_node(None, obj)
        for j, g in enumerate(n["gpus"]):
            for k, (mem, cores) in enumerate(g["used"]):
                pod = builders.pod(f"u-{name}-{j}-{k}")
                pod["spec"]["nodeName"] = name
                pod["metadata"]["annotations"][ann.ASSIGNMENT] = (
                    f'{{"version":1,"node":"{name}","containers":{{"main":'
                    f'[{{"uuid":"GPU-{name}-{j}","memory_mib":{mem},"cores":{cores}}}]}}}}')
                sched.on_pod(None, pod)
    percent = spec["percent"] if spec["memory"] is None else None
    annotations = {ann.NOUSE_GPUTYPE: spec["nouse"]} if spec["nouse"] else {}
    if spec["isolation"]:
        annotations[REQUIRE_ANNOTATION] = spec["isolation"]
    extra: dict[str, Any] = {}
    if spec["tolerate"]:
        extra["tolerations"] = [{"operator": "Exists"}]
    pod = parse(builders.pod("p", [builders.container(
        gpus=spec["gpus"], gpumem=spec["memory"], percent=percent, cores=spec["cores"],
        cpu=spec["cpu"])], annotations=annotations, **extra), Config())
    assert pod.error is None
    sched.cache.update_snapshot(sched.snapshot)
    snapshot, framework = sched.snapshot, sched.framework
    state = CycleState(NOW, snapshot)
    for plugin in framework.pre_filters:
        _, status = plugin.pre_filter(state, pod, snapshot)
        if status.code is Code.SKIP:
            state.skip_filter.add(plugin.name)
    positions = np.array(sorted(snapshot.positions.values()), dtype=np.int64)
    for plugin in framework.filters:
        if plugin.name in state.skip_filter or not isinstance(plugin, Explainer):
            continue
        answer = plugin.explain(state, pod, snapshot, positions)
        if answer is None:
            continue
        codes, table = answer
        for pos, code in zip(positions.tolist(), codes.tolist(), strict=True):
            info = snapshot.nodes[pos]
            assert info is not None
            expected = plugin.filter(state, pod, info)
            if code == -2:
                continue
            if code == -1:
                assert expected.ok, (plugin.name, info.name, expected)
            else:
                got = table[code]
                assert (got.code, got.reasons) == (expected.code, expected.reasons), (
                    plugin.name, info.name)


def test_summary_over_bulk_and_single_answers() -> None:
    sched = Scheduler(Config(), None, clock=FakeClock())
    for i in range(5):
        sched.on_node(None, builders.node(f"t{i}", builders.devices(f"t{i}", 1, memory_mib=8000,
                                                              model="Tesla T4"), heartbeat=NOW))
    sched.on_node(None, builders.node("cordoned", builders.devices("c", 1), heartbeat=NOW,
                                   unschedulable=True))
    sched.on_node(None, builders.node("nine", builders.devices("nine", 9, memory_mib=8000),
                                   heartbeat=NOW))
    sched.cache.update_snapshot(sched.snapshot)
    pod = parse(builders.pod("p", [builders.container(gpumem=9000)]), Config())
    result = sched.framework.schedule(pod, sched.snapshot, NOW)
    assert result.diagnosis is not None
    assert summarize(result.diagnosis) == (
        "0/7 nodes are available: 6 insufficient GPU memory, 1 node is unschedulable. "
        # 9000 MiB exceeds every GPU, and a cordon is no pod: nothing to preempt for.
        "preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling.")
    assert FakeHandle  # the plugins also build without a host
    assert set(REGISTRY) >= {"VGPU", "NodeResourcesFit"}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(node_st, min_size=1, max_size=6), spec=pod_st,
       policy=st.sampled_from(["binpack", "spread"]))
def test_best_first_order_picks_a_best_scoring_node(nodes: list[dict[str, Any]],
                                                    spec: dict[str, Any], policy: str) -> None:
    """Stopping at the first feasible node in the policy's order loses nothing: its score
    is the best of all feasible nodes, as if every one had been scored."""
    sched = Scheduler(Config(default_node_policy=policy), None, clock=FakeClock())
    for i, n in enumerate(nodes):
        name = f"n{i}"
        devices = tuple(Device(f"GPU-{name}-{j}", j, g["model"], g["memory"], g["cores"],
                               g["split"], j % 2, g["healthy"])
                        for j, g in enumerate(n["gpus"]))
        sched.on_node(None, builders.node(name, devices, cpu=n["cpu"], heartbeat=NOW))
        for j, g in enumerate(n["gpus"]):
            for k, (mem, cores) in enumerate(g["used"]):
                pod = builders.pod(f"u-{name}-{j}-{k}")
                pod["spec"]["nodeName"] = name
                pod["metadata"]["annotations"][ann.ASSIGNMENT] = (
                    f'{{"version":1,"node":"{name}","containers":{{"main":'
                    f'[{{"uuid":"GPU-{name}-{j}","memory_mib":{mem},"cores":{cores}}}]}}}}')
                sched.on_pod(None, pod)
    percent = spec["percent"] if spec["memory"] is None else None
    pod = parse(builders.pod("p", [builders.container(
        gpus=spec["gpus"] or 1, gpumem=spec["memory"], percent=percent, cores=spec["cores"])]),
        Config())
    sched.cache.update_snapshot(sched.snapshot)
    result = sched.framework.schedule(pod, sched.snapshot, NOW)
    state = result.state
    vgpu_plugin = next(p for p in sched.framework.plugins if p.name == "VGPU")
    scores = {info.name: vgpu_plugin.score(state, pod, info) for info in sched.snapshot
              if sched.framework.run_filters(state, pod, info).ok}
    if not scores:
        assert result.node is None
        return
    assert result.node is not None and result.evaluated <= len(nodes)
    assert scores[result.node] == pytest.approx(max(scores.values()), rel=1e-12)
