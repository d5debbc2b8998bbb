"""NodeReservation: a pod asking whole GPUs that waited gets a node held as it empties;
shared pods stop landing there, within a cap and for a time."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import vgpu.annotations as ann
from tests.scheduler.e2e_support import allocated, gpu_node, node_of, setup
from tests.scheduler.reservation_support import (
    SHARED,
    WHOLE,
    config,
    later,
    make,
    reservation,
    scenario,
)
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu.requests import parse_pod
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.gpu.node_reservation import HELD
from vgpu_scheduler.plugins.gpu.node_reservation.decide import (
    Knobs,
    NodeView,
    leaves_room,
    may_hold,
    rank,
    turns_away,
    whole_gpus,
    within_cap,
)

KNOBS = Knobs(wait_seconds=600, hold_seconds=1800, min_gpus=2, max_gpu_share=0.1)


@pytest.mark.parametrize(("containers", "inits", "expected"), [
    ([builders.container(gpus=2, cores=100)], [], 2),
    ([builders.container(gpus=1, cores=100), builders.container("b", gpus=3, cores=100)],
     [], 4),
    ([builders.container(gpus=2, cores=100)], [builders.container("i", gpus=4, cores=100)],
     4),  # the init container's GPUs go on to the apps: the largest counts
    ([builders.container(gpus=2, cores=50)], [], 0),  # shares a GPU
    ([builders.container(gpus=2, cores=100), builders.container("b", gpus=1, gpumem=2000)],
     [], 0),  # one container shares: the pod would land on a held node's idle GPUs anyway
    ([builders.container(gpus=None, cpu="1")], [], 0),
])
def test_whole_gpus(containers: list[dict[str, Any]], inits: list[dict[str, Any]],
                    expected: int) -> None:
    request = parse_pod(builders.pod("p", containers, init_containers=inits), Config())
    assert whole_gpus(request) == expected


@pytest.mark.parametrize(("waited", "expected"), [
    (0, False), (599.9, False), (600, True), (2399.9, True),  # its first hold
    (2400, False), (4199.9, False),  # as long without, so the node goes back to everyone
    (4200, True), (6000, False),
])
def test_may_hold_in_turns_from_the_wait_alone(waited: float, expected: bool) -> None:
    assert may_hold(waited, KNOBS) is expected


@pytest.mark.parametrize(("nodes", "need", "best"), [
    # the fewest GPUs to empty first, then the fewest GPUs held beyond the need,
    # then the least compute in use, then the name
    ([NodeView("a", 8, 4, 400), NodeView("b", 8, 6, 200)], 8, "b"),
    ([NodeView("a", 8, 8, 0), NodeView("b", 4, 4, 0)], 4, "b"),
    ([NodeView("a", 4, 2, 150), NodeView("b", 4, 2, 120)], 4, "b"),
    ([NodeView("b", 4, 2, 100), NodeView("a", 4, 2, 100)], 4, "a"),
    ([NodeView("a", 8, 2, 100), NodeView("b", 4, 2, 400)], 4, "b"),  # 2 to empty each
])
def test_rank(nodes: list[NodeView], need: int, best: str) -> None:
    assert min(nodes, key=lambda n: rank(n, need)).name == best


@pytest.mark.parametrize(("held", "adding", "cluster", "share", "expected"), [
    (0, 8, 80, 0.1, True), (0, 8, 79, 0.1, False), (8, 8, 160, 0.1, True),
    (8, 8, 159, 0.1, False), (0, 1, 1000, 0.0, False),
])
def test_within_cap(held: int, adding: int, cluster: int, share: float,
                    expected: bool) -> None:
    knobs = Knobs(600, 1800, 2, share)
    assert within_cap(held, adding, cluster, knobs) is expected


def test_turns_away_and_leaves_room() -> None:
    assert turns_away(0, 0) and turns_away(10, 5) and not turns_away(10, 11)
    assert leaves_room(8000, 1000, 3000, 4000) and not leaves_room(8000, 1000, 3001, 4000)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 16), max_size=40), st.integers(1, 512),
       st.floats(0, 1, allow_nan=False))
def test_holds_taken_one_by_one_never_pass_the_cap(sizes: list[int], cluster: int,
                                                   share: float) -> None:
    knobs = Knobs(600, 1800, 2, share)
    held = 0
    for size in sizes:
        if within_cap(held, size, cluster, knobs):
            held += size
    assert held <= share * cluster


# -- the whole scheduler -------------------------------------------------------------------


def test_a_waiting_whole_gpu_pod_holds_the_emptying_node() -> None:
    sched, cluster, clock, a = scenario(config())
    assert set(reservation(sched).holds()) == {a}
    make(cluster, "s2", SHARED, clock.now)  # a's idle GPU would take it
    sched.run_until_idle()
    assert node_of(cluster, "s2") is None
    (event, *_) = cluster.events(name="s2", reason="FailedScheduling")[::-1]
    assert HELD in event.message
    cluster.delete("pods", "s1", "default")  # a empties: big lands there (after backoff)
    later(sched, cluster, clock, 11)
    assert node_of(cluster, "big") == a
    assert reservation(sched).holds() == {}  # bound: the hold is released
    allocated(cluster, "big")
    cluster.delete("pods", "big", "default")
    later(sched, cluster, clock, 11)
    assert node_of(cluster, "s2") == a  # what it turned away lands once it ends


def test_without_a_hold_the_shared_pod_takes_the_node_and_big_keeps_waiting() -> None:
    # The same scenario with holds capped at nothing: what the plugin prevents.
    sched, cluster, clock, a = scenario(config(maxGpuShare=0))
    assert reservation(sched).holds() == {}
    make(cluster, "s2", SHARED, clock.now)
    sched.run_until_idle()
    assert node_of(cluster, "s2") == a
    allocated(cluster, "s2")
    cluster.delete("pods", "s1", "default")
    later(sched, cluster, clock, 61)
    assert node_of(cluster, "big") is None


def test_the_hold_ends_after_hold_seconds_and_the_node_goes_back() -> None:
    sched, cluster, clock, a = scenario(config(holdSeconds=120))
    assert set(reservation(sched).holds()) == {a}
    clock.advance(120)  # turns of 120 s from 60 s of waiting: at 301 s the hold had 1 s left
    make(cluster, "s2", SHARED, clock.now)
    sched.run_until_idle()
    assert reservation(sched).holds() == {}
    assert node_of(cluster, "s2") == a


def test_a_higher_priority_pod_is_not_turned_away() -> None:
    sched, cluster, clock, a = scenario(config())
    make(cluster, "urgent", SHARED, clock.now, priority=1000)
    sched.run_until_idle()
    assert node_of(cluster, "urgent") == a


def test_a_restarted_scheduler_holds_again_from_the_pods_wait() -> None:
    sched, cluster, clock, a = scenario(config())
    assert set(reservation(sched).holds()) == {a}
    restarted = Scheduler(config(), cluster, clock=clock)
    restarted.run_until_idle()
    assert set(reservation(restarted).holds()) == {a}  # big waited: its first attempt
    make(cluster, "s2", SHARED, clock.now)
    restarted.run_until_idle()
    assert node_of(cluster, "s2") is None


def test_a_pod_without_gpus_that_would_take_the_holders_cpu_goes_elsewhere() -> None:
    # The Filter that turns it away has no PreFilter mask (it weighs CPU node by node):
    # the search filters the node it would pick (a, the least allocated), finds it held
    # and takes the next best, as kube-scheduler filtering every node would.
    sched, cluster, clock = setup([gpu_node("a"), gpu_node("b")], config())
    for name, container in (("s1", SHARED),
                            ("w", builders.container(gpus=2, cores=100, cpu="2"))):
        make(cluster, name, container, clock.now)
        sched.run_until_idle()
        allocated(cluster, name)
    a = node_of(cluster, "s1")
    b = node_of(cluster, "w")
    assert a is not None and b not in (a, None)
    make(cluster, "big", builders.container(gpus=2, cores=100, cpu="8"), clock.now)
    later(sched, cluster, clock, 301)
    assert set(reservation(sched).holds()) == {a}
    make(cluster, "hog", builders.container(gpus=None, cpu="60"), clock.now)
    sched.run_until_idle()
    assert node_of(cluster, "hog") == b  # a would keep 4 CPUs of the 8 big asks


def test_a_pod_deleted_while_its_node_is_chosen_holds_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The informers run beside the scheduling loop: the pod's deletion may be handled
    # while its PostFilter chooses a node. Forced here, in the middle of the choice.
    sched, cluster, clock = setup([gpu_node("a"), gpu_node("b")], config())
    for name, container in (("s1", SHARED), ("w", WHOLE)):
        make(cluster, name, container, clock.now)
        sched.run_until_idle()
        allocated(cluster, name)
    make(cluster, "big", WHOLE, clock.now)
    sched.run_until_idle()
    plugin = reservation(sched)
    choose = plugin._fits_emptied

    def deleted_meanwhile(*args: Any) -> bool:
        if any(p["metadata"]["name"] == "big" for p in cluster.list("pods").items):
            cluster.delete("pods", "big", "default")
            sched.pump()  # what the pod informer's thread does meanwhile
        return choose(*args)

    monkeypatch.setattr(plugin, "_fits_emptied", deleted_meanwhile)
    later(sched, cluster, clock, 301)
    assert plugin.holds() == {}  # no hold for a pod that is gone


def test_a_pod_that_waited_less_than_the_bound_holds_nothing() -> None:
    sched, _, _, _ = scenario(config(waitSeconds=3600))
    assert reservation(sched).holds() == {}


# -- property: holds never over-commit, stay within the cap, belong to pending pods ------

SHAPES = {"whole2": builders.container(gpus=2, cores=100),
          "whole4": builders.container(gpus=4, cores=100),
          "shared": builders.container(gpus=1, gpumem=2000, cores=30),
          "half": builders.container(gpus=1, gpumem=8000, cores=50),
          "cpu": builders.container(gpus=None, cpu="1")}
steps = st.lists(st.one_of(
    st.tuples(st.just("create"), st.sampled_from(sorted(SHAPES)), st.sampled_from([0, 100])),
    st.tuples(st.just("delete"), st.integers(0, 60)),
    st.tuples(st.just("wait"), st.sampled_from([1.0, 30.0, 90.0, 200.0])),
), min_size=1, max_size=40)


def over_committed(cluster: MemoryCluster) -> list[str]:
    cores: dict[str, list[int]] = {}
    for pod in cluster.list("pods").items:
        raw = pod["metadata"]["annotations"].get(ann.ASSIGNMENT)
        if raw is None or not pod["spec"].get("nodeName"):
            continue
        for granted in codecs.decode_assignment(raw).containers.values():
            for g in granted:
                cores.setdefault(g.uuid, []).append(g.cores)
    return [u for u, c in cores.items() if sum(c) > 100 or (len(c) > 1 and max(c) >= 100)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example([("create", "half", 0)] * 8 + [("create", "whole4", 0)] * 3 + [
    ("wait", 200.0), ("wait", 200.0), ("create", "shared", 0), ("delete", 8), ("wait", 1.0),
    ("delete", 8), ("wait", 1.0)])
# A pod of priority 100 preempts one of priority 0 (p2 on a 4-GPU node): pods also leave
# the cluster as DefaultPreemption's victims, not only when the test deletes them.
@example([("create", "cpu", 0), ("create", "cpu", 0), ("create", "whole4", 0),
          ("create", "whole4", 0), ("delete", 0), ("create", "whole4", 100), ("delete", 1)])
@given(steps)
def test_holds_never_over_commit_and_stay_within_the_cap(ops: list[tuple[Any, ...]]) -> None:
    nodes = [gpu_node("a", 4), gpu_node("b", 4), gpu_node("c", 2), gpu_node("d", 2)]
    sched, cluster, clock = setup(nodes, config(waitSeconds=60, holdSeconds=300,
                                                maxGpuShare=0.34))
    names: list[str] = []
    held_ever = 0
    for i, op in enumerate(ops):
        if op[0] == "create":
            name = f"p{i}"
            make(cluster, name, SHAPES[op[1]], clock.now, priority=op[2])
            names.append(name)
        elif op[0] == "delete" and names:
            cluster.delete("pods", names.pop(op[1] % len(names)), "default")
        elif op[0] == "wait":
            clock.advance(op[1])
            for node in ("a", "b", "c", "d"):
                cluster.patch_annotations("nodes", node, {
                    ann.NODE_HEARTBEAT: codecs.encode_heartbeat(
                        dt.datetime.fromtimestamp(clock.now, dt.UTC))})
        sched.run_until_idle()
        for pod in cluster.list("pods").items:
            if pod["metadata"]["annotations"].get(ann.BIND_PHASE) == ann.PHASE_ALLOCATING:
                allocated(cluster, pod["metadata"]["name"])
        present = {p["metadata"]["name"] for p in cluster.list("pods").items}
        for name in [n for n in names if n not in present]:
            assert cluster.events(name=name, reason="Preempted"), f"{name} vanished"
            names.remove(name)
        assert not over_committed(cluster)
        holds = reservation(sched).holds()
        held_ever += bool(holds)
        assert sum(h.gpus for h in holds.values()) <= 0.34 * 12
        assert len({h.pod for h in holds.values()}) == len(holds)
        pods = {p["metadata"]["uid"]: p for p in cluster.list("pods").items}
        for held in holds.values():
            pod = pods.get(held.pod)
            assert pod is None or not pod["spec"].get("nodeName"), "a bound pod holds"
            node = cluster.get("pods", pod["metadata"]["name"], "default") if pod else None
            assert node is None or not node["spec"].get("nodeName")
