"""The Permit gate holds only pods the node agent could confuse (``permitGate: ambiguous``),
or every GPU pod behind the node's in-flight one (``permitGate: node``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.scheduler.e2e_support import allocated, gpu_node, node_of, setup
from vgpu import builders
from vgpu.codecs import Assignment, GrantedDevice
from vgpu.config import Config, SchedulerConfig
from vgpu.confusable import confusable
from vgpu_scheduler.plugins.gpu.allocation_gate.gate import Gate


def on(uuid: str, mem: int) -> Assignment:
    return Assignment("n1", {"main": (GrantedDevice(uuid, mem, 0),)})


def test_whole_gpu_pods_on_one_node_are_all_in_flight_at_once() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 8)])
    for i in range(8):
        cluster.create("pods", builders.pod(f"p{i}", [builders.container(gpus=1)]))
    sched.run_until_idle()
    assert all(node_of(cluster, f"p{i}") == "n1" for i in range(8))
    assert sched.waiting_pods() == {}


def test_identical_pods_on_one_gpu_are_not_held_but_different_ones_are() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1)])
    for name, mem in (("a", 1000), ("b", 1000), ("c", 3000), ("d", 1000)):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=mem)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") == node_of(cluster, "b") == "n1"
    # c is confusable with a and b; d is not, but it does not overtake c
    assert sched.waiting_pods() == {"default/c": "n1", "default/d": "n1"}
    allocated(cluster, "a")
    sched.run_until_idle()
    assert node_of(cluster, "c") is None
    allocated(cluster, "b")
    sched.run_until_idle()
    assert node_of(cluster, "c") == "n1" and node_of(cluster, "d") is None
    allocated(cluster, "c")
    sched.run_until_idle()
    assert node_of(cluster, "d") == "n1"


def test_node_mode_keeps_one_gpu_pod_in_flight_per_node() -> None:
    config = Config(scheduler=SchedulerConfig(permit_gate="node"))
    sched, cluster, _ = setup([gpu_node("n1", 2)], config)
    for i in range(2):
        cluster.create("pods", builders.pod(f"p{i}", [builders.container(gpus=1)]))
    sched.run_until_idle()
    assert node_of(cluster, "p0") == "n1" and node_of(cluster, "p1") is None
    allocated(cluster, "p0")
    sched.run_until_idle()
    assert node_of(cluster, "p1") == "n1"


@pytest.mark.parametrize(("mode", "through"), [("ambiguous", ["b", "d"]), ("node", ["b"])])
def test_advance_lets_every_clear_waiter_through_in_order(mode: str, through: list[str]) -> None:
    gate = Gate(30, confusable if mode == "ambiguous" else (lambda a, b: True))
    assert gate.enter("a", "n1", 0, on("GPU-A", 1))
    assert not gate.enter("b", "n1", 0, on("GPU-A", 2))
    waiting = ["b"]
    if mode == "ambiguous":
        assert gate.enter("x", "n1", 0, on("GPU-B", 9))  # another GPU: through at once
        assert not gate.enter("c", "n1", 0, on("GPU-B", 3))  # behind x
        assert not gate.enter("d", "n1", 0, on("GPU-A", 2))  # as b: only behind a
        waiting += ["c", "d"]
    assert gate.waiting("n1") == waiting
    gate.leave("a")
    assert gate.advance("n1", 1) == through


def test_an_unreadable_assignment_is_held_and_a_timed_out_holder_lets_it_through() -> None:
    gate = Gate(30, confusable)
    gate.hold("old", "n1", 0, None)
    assert not gate.enter("new", "n1", 1, on("GPU-A", 1))
    assert gate.advance("n1", 29) == []
    assert gate.advance("n1", 30) == ["new"]
    assert gate.holders("n1") == {"new": 30}


@pytest.mark.parametrize("mode", ["ambiguous", "node"])
def test_binpack_sends_a_pod_that_would_wait_to_a_node_where_it_goes_on(mode: str) -> None:
    config = Config(scheduler=SchedulerConfig(permit_gate=mode))
    sched, cluster, _ = setup([gpu_node("n1", 1), gpu_node("n2", 1)], config)
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    first = node_of(cluster, "a")
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    # binpack would put b with a; it would wait there, the other node takes it now
    assert node_of(cluster, "b") not in (None, first)
    assert sched.waiting_pods() == {}
    # once a is allocated, binpack packs again: c joins the fuller node at once
    allocated(cluster, "a")
    allocated(cluster, "b")
    sched.run_until_idle()
    cluster.create("pods", builders.pod("c", [builders.container(gpumem=500)]))
    sched.run_until_idle()
    assert node_of(cluster, "c") in (first, node_of(cluster, "b"))
    cluster.create("pods", builders.pod("d", [builders.container(gpumem=700)]))
    sched.run_until_idle()
    assert node_of(cluster, "d") not in (None, node_of(cluster, "c"))
    # every node busy: the pod waits at the best one, as before
    cluster.create("pods", builders.pod("e", [builders.container(gpumem=900)]))
    sched.run_until_idle()
    assert node_of(cluster, "e") is None and len(sched.waiting_pods()) == 1


def test_a_free_gpu_the_pod_does_not_fit_on_does_not_keep_the_node_first() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2), gpu_node("n2", 2)])
    cluster.create("pods", builders.pod("big", [builders.container(gpumem=16000)]))
    sched.run_until_idle()
    allocated(cluster, "big")
    sched.run_until_idle()
    full = node_of(cluster, "big")
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") == full  # binpack: the fuller node, its other GPU
    # b fits only on the GPU a is in flight on (the other is full): the other node
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    assert node_of(cluster, "b") not in (None, full) and sched.waiting_pods() == {}


def test_a_remembered_answer_is_asked_again_once_the_node_changes() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1), gpu_node("n2", 1)])
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    first = node_of(cluster, "a")
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    other = node_of(cluster, "b")
    assert other not in (None, first)  # a 2000 MiB pod would wait at a's node
    allocated(cluster, "a")
    allocated(cluster, "b")
    sched.run_until_idle()
    cluster.create("pods", builders.pod("c", [builders.container(gpumem=3000)]))
    sched.run_until_idle()
    assert node_of(cluster, "c") == other  # binpack: the fuller node
    # The same 2000 MiB question about a's node: a is no longer in flight there, while c
    # is in flight at the fuller node; asked again, a's node goes on at once.
    cluster.create("pods", builders.pod("e", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    assert node_of(cluster, "e") == first and sched.waiting_pods() == {}


def test_a_two_gpu_pod_that_would_wait_goes_on_elsewhere_too() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2), gpu_node("n2", 2)])
    cluster.create("pods", builders.pod("a", [builders.container(gpus=2, gpumem=1000)]))
    sched.run_until_idle()
    cluster.create("pods", builders.pod("b", [builders.container(gpus=2, gpumem=2000)]))
    sched.run_until_idle()
    assert {node_of(cluster, "a"), node_of(cluster, "b")} == {"n1", "n2"}
    assert sched.waiting_pods() == {}


_NODES = ["n1", "n2", "n3"]
_KEYS = ["a", "b", "c", "d"]
_OPS = st.lists(st.tuples(st.sampled_from(["enter", "hold", "leave", "advance"]),
                          st.sampled_from(_KEYS), st.sampled_from(_NODES),
                          st.floats(0, 50)), max_size=30)


@given(_OPS)
def test_a_pod_is_in_flight_on_one_node_at_most_and_leaves_from_there(
        ops: list[tuple[str, str, str, float]]) -> None:
    gate = Gate(timeout=30)  # one GPU pod per node (every pair conflicts)
    now = 0.0
    for op, key, node, step in ops:
        now += step
        if op == "enter":
            gate.enter(key, node, now)
        elif op == "hold":
            gate.hold(key, node, now)
        elif op == "leave":
            gate.leave(key)
        else:
            gate.advance(node, now)
        held = [(k, n) for n in _NODES for k in gate.holders(n)]
        assert len({k for k, _ in held}) == len(held)
        for n in _NODES:
            assert len(gate.in_flight_view(n)[0]) == len(gate.holders(n)) + len(gate.waiting(n))
    for key, node in [(k, n) for n in _NODES for k in gate.holders(n)]:
        assert gate.leave(key) == node
        assert all(key not in gate.holders(n) for n in _NODES)


def test_the_in_flight_view_follows_every_change() -> None:
    a = Assignment("n1", {"main": (GrantedDevice("GPU-0", 4096, 10),)})
    gate = Gate(timeout=30, conflicts=confusable)
    assert gate.in_flight_view("n1") == ([], {})
    assert gate.enter("p", "n1", 0.0)
    assert gate.in_flight_view("n1")[0] == [None] and gate.in_flight_view("n1")[1] is None
    gate.hold("p", "n1", 0.0, a)
    assert gate.in_flight_view("n1") == ([a], {"GPU-0": {(4096, 10, None)}})
    assert not gate.enter("q", "n1", 1.0)  # unknown: waits behind p
    assert gate.in_flight_view("n1")[0] == [a, None]
    gate.leave("p")
    assert gate.in_flight_view("n1")[0] == [None]
    assert gate.advance("n1", 2.0) == ["q"]
    assert gate.in_flight_view("n1")[0] == [None]
    gate.hold("q", "n2", 2.0, None)  # its binding went to another node
    assert gate.in_flight_view("n1") == ([], {}) and gate.in_flight_view("n2")[0] == [None]
    assert gate.is_open("n2", 40.0) and gate.in_flight_view("n2") == ([], {})


def test_a_pods_preference_keeps_its_say_where_it_would_wait() -> None:
    """The gate takes a node's GPU placement score, never the pod's soft rules: a pod that
    prefers the node where it would wait still goes there (and waits)."""
    nodes = [gpu_node("n1", 1), gpu_node("n2", 1)]
    nodes[0]["metadata"]["labels"]["disk"] = "ssd"
    sched, cluster, _ = setup(nodes)
    prefers_ssd = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)],
                                        affinity=prefers_ssd))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=2000)],
                                        affinity=prefers_ssd))
    cluster.create("pods", builders.pod("c", [builders.container(gpumem=3000)]))
    sched.run_until_idle()
    assert sched.waiting_pods() == {"default/b": "n1"}
    # Without a preference, the node where it would wait loses to the other one.
    assert node_of(cluster, "c") == "n2"
