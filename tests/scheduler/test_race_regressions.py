"""The race harness's regression examples: the interleavings of issue 31, step by step,
and each one the harness found on the way (the invariants are checked after every step,
as hypothesis does)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.scheduler.race_machine import RaceMachine


def run(*steps: Callable[[RaceMachine], object],
        binding_checks_uid: bool = False) -> RaceMachine:
    machine = RaceMachine()
    machine.begin(binding_checks_uid)
    try:
        for step in steps:
            step(machine)
            machine.no_gpu_over_committed()
            machine.every_bound_pod_counted_once()
    finally:
        machine.teardown()
    return machine


def test_a_lost_bind_race_never_uncounts_the_bound_pod() -> None:
    # p is popped; before Reserve another binder binds it and the watch shows that; the
    # cycle goes on. Then q, as large, must not be bound to the same GPU.
    run(lambda m: m.create_pod("p", (16000, 100), 0),
        lambda m: m.deliver("pods", 1),
        lambda m: m.schedule_interrupted("other-binder", (0, 0)),
        lambda m: m.bind(0),
        lambda m: m.create_pod("q", (16000, 100), 0),
        lambda m: m.deliver("pods", 4),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.quiesce())


@pytest.mark.parametrize("binding_checks_uid", [False, True], ids=["1.20", "1.23 on"])
def test_a_binding_never_lands_on_a_same_name_successor_unnoticed(
        binding_checks_uid: bool) -> None:
    # p (2000 MiB) is assumed, its binding queued; a StatefulSet replaces p with a 12000
    # MiB one, which is scheduled too; the old binding goes out first (a 1.20 server binds
    # the new p with the old slices, a newer one refuses it), then the new one; then q
    # (16000 MiB) is scheduled before the watch shows p bound.
    run(lambda m: m.create_pod("p", (2000, 20), 0),
        lambda m: m.deliver("pods", 1),
        lambda m: m.schedule(),
        lambda m: m.recreate_pod("p", (12000, 80)),
        lambda m: m.create_pod("q", (16000, 100), 0),
        lambda m: m.deliver("pods", 3),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.bind(0),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.quiesce(),
        binding_checks_uid=binding_checks_uid)


def test_room_a_nomination_gives_up_wakes_the_pods_it_can_serve() -> None:
    # h preempts v on the 32 GiB GPU and is nominated there. Later v and b (on a 16 GiB
    # GPU) leave; w (20000 MiB: only the 32 GiB GPU can take it) is tried while the
    # nomination still holds the room, and parks; then h is tried and goes to b's GPU.
    # The 32 GiB GPU is free: w must not wait podMaxUnschedulableSeconds for it.
    def settle(m: RaceMachine) -> None:
        for _ in range(3):
            m.deliver("pods", 4)
            m.deliver("nodes", 4)
            m.schedule()
            m.bind(0)

    def allocate_all(m: RaceMachine) -> None:
        for name in "vbc":
            m.allocate(name)

    def later(m: RaceMachine) -> None:
        for _ in range(10):
            m.tick(31.0)

    run(lambda m: m.add_node("a100"),
        lambda m: m.deliver("nodes", 4),
        lambda m: m.create_pod("v", (30000, 50), 0),
        lambda m: m.create_pod("b", (16000, 100), 100),
        lambda m: m.create_pod("c", (16000, 100), 100),
        settle,
        allocate_all,
        lambda m: m.create_pod("h", (16000, 100), 100),
        settle,
        later,  # h is tried again (podMaxUnschedulableSeconds): a longer backoff
        lambda m: m.schedule(),
        lambda m: m.create_pod("w", (20000, 20), 0),
        settle,
        lambda m: m.delete_pod("b"),
        lambda m: m.kubelet_removes_pod("b"),
        lambda m: m.kubelet_removes_pod("v"),
        lambda m: m.deliver("pods", 10),
        lambda m: m.tick(1.0),
        lambda m: m.schedule(),  # w, while the nomination holds the room
        lambda m: m.tick(1.0),
        lambda m: m.schedule(),  # h, to b's GPU
        lambda m: m.quiesce())


def test_a_binding_that_landed_on_a_successor_keeps_its_slices_counted() -> None:
    # Found by the long profile. q's cycle is interrupted by a StatefulSet replacing q; its
    # Binding goes out with the answer lost, and a 1.20 server carries it out on the
    # successor, with the predecessor's 16000 MiB. Read back, the pod is another of the
    # name: that must not forget the slices the successor now holds, or p and r (16000
    # MiB each, seen before the successor) get both GPUs, the successor's included.
    run(lambda m: m.create_pod("q", (16000, 100), 0),
        lambda m: m.create_pod("p", (16000, 100), 0),
        lambda m: m.create_pod("r", (16000, 100), 0),
        lambda m: m.deliver("pods", 3),
        lambda m: m.next_binding_fails("lost"),
        lambda m: m.schedule_interrupted("recreate", (2000, 20)),
        lambda m: m.bind(0),
        lambda m: m.schedule(),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.bind(0),
        lambda m: m.quiesce())


@pytest.mark.parametrize("waited", [5.0, 31.0], ids=["lands-soon", "lands-near-the-bound"])
def test_a_binding_whose_answer_was_lost_and_that_lands_late_keeps_its_room(
        waited: float) -> None:
    # Issue 36, case 1: p's Binding goes out, its answer is lost, and the API server
    # applies it seconds later. Read back in between, p is still pending; q, as large,
    # must not be bound to p's GPU meanwhile; and p's room holds until the late Binding
    # lands (or could no longer).
    def tick(m: RaceMachine) -> None:
        m.tick(waited)

    run(lambda m: m.create_pod("p", (12000, 50), 0),
        lambda m: m.deliver("pods", 1),
        lambda m: m.next_binding_fails("late"),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.create_pod("q", (12000, 50), 0),
        lambda m: m.create_pod("r", (12000, 50), 0),
        lambda m: m.deliver("pods", 4),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        tick,
        lambda m: m.schedule(),
        lambda m: m.bind(0),
        lambda m: m.late_binding_lands(0),
        lambda m: m.deliver("pods", 8),
        lambda m: m.quiesce())
