"""The framework host: profiles, extension-point order, masks, limits, diagnosis."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vgpu import builders
from vgpu.codecs import Assignment, GrantedDevice
from vgpu.config import Config, SchedulerConfig
from vgpu.errors import ConfigError
from vgpu_scheduler.framework import profile
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.diagnosis import summarize
from vgpu_scheduler.framework.handle import Handle, Host
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.framework.runtime import Framework
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import (
    SKIP,
    SUCCESS,
    WAIT,
    Code,
    Status,
    unschedulable,
)
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.plugins.registry import REGISTRY

NOW = 1_800_000_000.0


def snapshot_of(names: list[str], columns: Any = ()) -> Snapshot:
    cache = Cache()
    for name in names:
        cache.set_node(builders.node(name, builders.devices(name, 1), heartbeat=NOW), NOW)
    snap = Snapshot(columns)
    cache.update_snapshot(snap)
    return snap


def a_pod(name: str = "p", **kw: Any) -> PodInfo:
    return parse(builders.pod(name, **kw), Config())


class Recorder:
    """A plugin at every point, recording calls; behaviour set per test."""

    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls
        self.reject: set[str] = set()
        self.scores: dict[str, float] = {}
        self.mask_out: set[str] = set()
        self.reserve_status = SUCCESS
        self.permit_status = SUCCESS
        self.bind_status = SUCCESS

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        self.calls.append(f"{self.name}.pre_filter")
        if not self.mask_out:
            return None, SUCCESS
        mask = np.ones(len(snapshot.nodes), dtype=np.bool_)
        for name in self.mask_out:
            mask[snapshot.positions[name]] = False
        return PreFilterResult(mask=mask), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        self.calls.append(f"{self.name}.filter:{node.name}")
        return unschedulable(f"{self.name} says no") if node.name in self.reject else SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        return self.scores.get(node.name, 0.0)

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.calls.append(f"{self.name}.reserve")
        return self.reserve_status

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.calls.append(f"{self.name}.unreserve")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return self.permit_status

    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.calls.append(f"{self.name}.bind")
        return self.bind_status


def test_filters_run_in_order_and_stop_at_first_rejection() -> None:
    calls: list[str] = []
    a, b = Recorder("A", calls), Recorder("B", calls)
    a.reject = {"n1"}
    fw = Framework([a, b])
    result = fw.schedule(a_pod(), snapshot_of(["n1", "n2"]), NOW)
    assert result.node == "n2"
    assert calls == ["A.pre_filter", "B.pre_filter", "A.filter:n1", "A.filter:n2",
                     "B.filter:n2"]


def test_weighted_scores_pick_the_best_and_ties_keep_order() -> None:
    calls: list[str] = []
    a, b = Recorder("A", calls), Recorder("B", calls)
    a.scores = {"n1": 10, "n2": 0, "n3": 0}
    b.scores = {"n1": 0, "n2": 6, "n3": 0}
    snap = snapshot_of(["n1", "n2", "n3"])
    assert Framework([a, b], {"A": 1, "B": 1}).schedule(a_pod(), snap, NOW).node == "n1"
    assert Framework([a, b], {"A": 1, "B": 2}).schedule(a_pod(), snap, NOW).node == "n2"
    a.scores = b.scores = {}
    assert Framework([a, b]).schedule(a_pod(), snap, NOW).node == "n1"


def test_pre_filter_mask_and_skip() -> None:
    calls: list[str] = []
    a = Recorder("A", calls)
    a.mask_out = {"n1"}
    result = Framework([a]).schedule(a_pod(), snapshot_of(["n1", "n2"]), NOW)
    assert result.node == "n2"
    assert "A.filter:n1" not in calls

    class Skipper(Recorder):
        def pre_filter(self, state: CycleState, pod: PodInfo,
                       snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
            return None, SKIP

    s = Skipper("S", calls)
    s.reject = {"n1", "n2"}
    assert Framework([s]).schedule(a_pod(), snapshot_of(["n1", "n2"]), NOW).node == "n1"


def test_diagnosis_covers_masked_nodes_with_their_real_reasons() -> None:
    calls: list[str] = []
    a = Recorder("A", calls)
    a.mask_out = {"n1", "n2"}
    a.reject = {"n1", "n2", "n3"}
    result = Framework([a]).schedule(a_pod(), snapshot_of(["n1", "n2", "n3"]), NOW)
    assert result.node is None and result.diagnosis is not None
    assert summarize(result.diagnosis) == "0/3 nodes are available: 3 A says no."
    assert result.diagnosis.rejecting_plugins == {"A"}


def test_reserve_failure_unreserves_everything_in_reverse() -> None:
    calls: list[str] = []
    a, b = Recorder("A", calls), Recorder("B", calls)
    b.reserve_status = unschedulable("nope")
    fw = Framework([a, b])
    status = fw.reserve(CycleState(NOW), a_pod(), "n1")
    assert status.code is Code.UNSCHEDULABLE and status.plugin == "B"
    assert calls == ["A.reserve", "B.reserve", "B.unreserve", "A.unreserve"]


def test_permit_wait_collects_plugins_and_bind_skips() -> None:
    calls: list[str] = []
    a, b = Recorder("A", calls), Recorder("B", calls)
    a.permit_status = WAIT
    status, waiting = Framework([a, b]).permit(CycleState(NOW), a_pod(), "n1")
    assert status.code is Code.WAIT and waiting == {"A"}
    a.bind_status = SKIP
    assert Framework([a, b]).bind(CycleState(NOW), a_pod(), "n1").ok
    assert calls[-2:] == ["A.bind", "B.bind"]
    b.bind_status = SKIP
    assert Framework([a, b]).bind(CycleState(NOW), a_pod(), "n1").code is Code.ERROR


# --- profiles ----------------------------------------------------------------------------

def test_default_profile_builds_every_registered_plugin() -> None:
    fw = profile.build(SchedulerConfig(), REGISTRY)
    assert [p.name for p in fw.plugins] == list(SchedulerConfig().plugins)
    assert fw.queue_sort.name == "PrioritySort"
    # kube-scheduler's scorers with its default weights, beside the vGPU node policy (and
    # the fault domains', which scores only pods that keep to their namespace).
    assert [(s.plugin.name, s.weight) for s in fw.scorers] == [
        ("TaintToleration", 3), ("NodeAffinity", 2), ("PodTopologySpread", 2),
        ("InterPodAffinity", 2), ("ImageLocality", 1), ("FaultDomain", 1), ("VGPU", 1)]


@pytest.mark.parametrize(("plugins", "weights", "message"), [
    (("PrioritySort", "Nope", "VGPUBinder"), (), "unknown plugin 'Nope'"),
    (("NodeResourcesFit", "VGPUBinder"), (), "no queue sort"),
    (("PrioritySort", "NodeResourcesFit"), (), "no bind plugin"),
    (("PrioritySort", "NodeResourcesFit", "VGPUBinder"), ("NodeResourcesFit=2",),
     "does not score"),
])
def test_bad_profiles_are_config_errors(plugins: tuple[str, ...], weights: tuple[str, ...],
                                        message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        profile.build(SchedulerConfig(plugins=plugins, score_weights=weights), REGISTRY)


def test_profile_from_config_file_text() -> None:
    from vgpu import config
    cfg = config.parse_text(
        "scheduler:\n  plugins: [PrioritySort, NodeResourcesFit, VGPU, VGPUBinder]\n"
        "  scoreWeights: [VGPU=3]\n  percentageOfNodesToScore: 30\n")
    fw = profile.build(cfg.scheduler, REGISTRY, Host(config=cfg))
    assert [(s.plugin.name, s.weight) for s in fw.scorers] == [("VGPU", 3)]
    assert fw.percentage_of_nodes_to_score == 30


def test_unavailable_default_gpu_policy_is_a_config_error() -> None:
    # The default profile has no plugin that provides "fragmentation-aware".
    cfg = Config(default_gpu_policy="fragmentation-aware")
    with pytest.raises(ConfigError, match="fragmentation-aware"):
        profile.build(cfg.scheduler, REGISTRY, Host(config=cfg))


class _Probe:
    """A plugin that keeps the handle it was built with."""

    name = "Probe"

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        return (arrival,)

    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS


class _Room:
    """A host's nominator and waiting room that record what plugins ask of them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def nominate(self, pod: PodInfo, node: str, claim: object) -> None:
        self.calls.append(("nominate", pod.key, node))

    def clear_nomination(self, pod_key: str) -> None:
        self.calls.append(("clear", pod_key))

    def allow(self, pod_key: str, plugin: str) -> bool:
        self.calls.append(("allow", pod_key, plugin))
        return pod_key == "last"

    def reject(self, pod_key: str, reason: str) -> bool:
        self.calls.append(("reject", pod_key, reason))
        return True


def test_the_framework_is_the_plugins_handle() -> None:
    # As kube-scheduler's frameworkImpl: plugins are built with the framework itself, and
    # what the host lends it (clock, nominator, waiting room) is reached through it.
    cfg = Config()
    room, woken = _Room(), []
    host = Host(config=cfg, clock=lambda: 42.0, nominator=room, waiting=room,
                wake=lambda: woken.append(True))
    fw = profile.build(SchedulerConfig(plugins=("Probe",)), {"Probe": _Probe}, host)
    [probe] = fw.plugins
    assert probe.handle is fw
    assert fw.config is cfg and fw.now() == 42.0 and fw.cluster is None
    fw.nominate(a_pod(), "n1", None)
    fw.clear_nomination("default/p")
    fw.allow("other", "Probe")
    assert woken == []  # another plugin still holds the pod
    fw.allow("last", "Probe")
    fw.reject("p", "Probe", "gone")
    assert woken == [True, True]
    assert room.calls == [("nominate", "default/p", "n1"), ("clear", "default/p"),
                          ("allow", "other", "Probe"), ("allow", "last", "Probe"),
                          ("reject", "p", "Probe: gone")]
    assert fw.lister("pods").items() == [] and fw.node_info("n1") is None  # detached


def test_the_assignment_lives_in_the_cycle_state() -> None:
    # Reserve leaves it there, once; a clone (a preemption trial) writes its own.
    state = CycleState(NOW)
    assert state.assignment is None
    claimed = Assignment("n1", {"main": (GrantedDevice("GPU-0", 1000, 10),)})
    state.assignment = claimed
    clone = state.clone()
    clone.assignment = None
    assert state.assignment is claimed and clone.assignment is None
