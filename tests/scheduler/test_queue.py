"""The scheduling queue: order, backoff, parking and event-driven wake-ups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.scheduler.helpers import FakeClock
from vgpu import builders
from vgpu.config import Config
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.host.queue import SchedulingQueue
from vgpu_scheduler.host.queue_profile import Fifo
from vgpu_scheduler.host.queued_pod import POD_SPEC
from vgpu_scheduler.plugins.kube.priority_sort import sort_key


def info(name: str, priority: int = 0) -> PodInfo:
    return parse(builders.pod(name, priority=priority), Config())


Hint = Callable[[PodInfo, set[str], ClusterEvent], bool]


class Profile(Fifo):
    """PrioritySort's order; an event helps the pods ``hint`` says it helps."""

    def __init__(self, hint: Hint) -> None:
        self.hint = hint

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        return sort_key(pod.priority, arrival)

    def could_help(self, pod: PodInfo, plugins: set[str], event: ClusterEvent) -> bool:
        return self.hint(pod, plugins, event)


def make(clock: FakeClock | None = None,
         hint: Hint = lambda *a: True) -> tuple[SchedulingQueue, FakeClock]:
    clock = clock or FakeClock()
    q = SchedulingQueue(clock, Profile(hint), initial_backoff=1.0, max_backoff=10.0,
                        max_unschedulable=300.0)
    return q, clock


def drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (qp := q.pop()) is not None:
        out.append(qp.info.name)
        q.done(qp.key)
    return out


def test_priority_then_arrival() -> None:
    q, _ = make()
    for name, prio in [("a", 0), ("b", 10), ("c", 0), ("d", 10), ("e", -5)]:
        q.add(info(name, prio))
    assert drain(q) == ["b", "d", "a", "c", "e"]


def test_backoff_doubles_to_the_cap() -> None:
    q, clock = make()
    q.add(info("p"))
    qp = q.pop()
    waits = []
    for attempt in range(1, 7):
        assert qp is not None
        q.requeue(qp, unschedulable=False, message="error")
        start = clock.now
        while (qp := q.pop()) is None:
            clock.advance(0.25)
        waits.append(clock.now - start)
        assert qp.attempts == attempt
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_pod_failing_thousands_of_times_keeps_the_capped_backoff() -> None:
    # A pod parked for weeks and woken by every deletion (the simulator's churn replay)
    # reached 1,025 attempts; 2**1024 as a float overflowed and the attempt crashed.
    q, clock = make()
    q.add(info("p"))
    qp = q.pop()
    assert qp is not None
    qp.attempts = 5000
    q.requeue(qp, unschedulable=False, message="error")
    assert q.next_backoff() == clock.now + 10.0


def test_unschedulable_pods_wait_for_an_event_that_could_help() -> None:
    q, clock = make(hint=lambda pod, plugins, ev: "VGPU" in plugins)
    q.add(info("gpu"))
    q.add(info("cpu"))
    for _ in range(2):
        qp = q.pop()
        assert qp is not None
        q.requeue(qp, unschedulable=True, rejected_by={"VGPU" if qp.info.name == "gpu" else "Fit"})
    clock.advance(100)
    assert q.pop() is None  # parked, not backing off
    event = ClusterEvent("pod", "delete", "n1")
    moved = q.on_event(event)
    assert moved == 1
    assert drain(q) == ["gpu"]
    assert q.counts()["unschedulable"] == 1


def test_only_an_update_of_the_pod_helps_a_pod_whose_spec_failed() -> None:
    q, clock = make()
    q.add(info("bad"))
    qp = q.pop()
    assert qp is not None
    q.requeue(qp, unschedulable=True, rejected_by={POD_SPEC})
    clock.advance(1.0)
    assert q.on_event(ClusterEvent("node", "add", "n")) == 0
    assert q.on_event(None) == 0
    q.add(info("bad", priority=1))  # the pod was updated
    assert drain(q) == ["bad"]


def test_woken_pod_still_in_backoff_waits_it_out() -> None:
    q, clock = make()
    q.add(info("p"))
    qp = q.pop()
    assert qp is not None
    q.requeue(qp, unschedulable=True)
    q.on_event(ClusterEvent("node", "add", "n"))
    assert q.pop() is None
    clock.advance(1.0)
    assert drain(q) == ["p"]


def test_event_during_a_cycle_is_not_lost() -> None:
    q, clock = make()
    q.add(info("p"))
    qp = q.pop()
    assert qp is not None
    # a node is added while p is being scheduled; p then fails as unschedulable
    q.on_event(ClusterEvent("node", "add", "n"))
    q.requeue(qp, unschedulable=True)
    assert q.counts()["unschedulable"] == 0
    clock.advance(1.0)
    assert drain(q) == ["p"]


def test_parked_pods_are_retried_after_max_unschedulable() -> None:
    q, clock = make()
    q.add(info("p"))
    qp = q.pop()
    assert qp is not None
    q.requeue(qp, unschedulable=True)
    clock.advance(299)
    assert q.pop() is None
    clock.advance(1)
    assert drain(q) == ["p"]


def test_delete_and_update() -> None:
    q, _ = make()
    q.add(info("a"))
    q.add(info("b"))
    q.delete("default/a")
    assert "default/a" not in q
    qp = q.pop()
    assert qp is not None and qp.info.name == "b"
    # updated while in flight: the failure sends it straight back to active
    q.add(parse(builders.pod("b", priority=3), Config()))
    q.requeue(qp, unschedulable=True)
    again = q.pop()
    assert again is not None and again.info.priority == 3
    # deleted while in flight: the failure does not resurrect it
    q.delete("default/b")
    q.requeue(again, unschedulable=True)
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 0}


def test_pop_waits_and_can_be_interrupted() -> None:
    import threading
    q, _ = make()
    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(q.pop(timeout=5.0)))
    t.start()
    q.interrupt()
    t.join(timeout=5)
    assert result == [None]
    t = threading.Thread(target=lambda: result.append(q.pop(timeout=5.0)))
    t.start()
    q.add(info("late"))
    t.join(timeout=5)
    assert result[-1] is not None and result[-1].info.name == "late"


# -- preemptors held while their calls run (kube's IsPodRunningPreemption) ----------------


def _preempting(q: SchedulingQueue, name: str = "p") -> str:
    """A pod whose attempt started a preemption: held, then parked by its failed attempt."""
    q.add(info(name, 10))
    qp = q.pop()
    assert qp is not None
    q.hold(qp.key)
    q.requeue(qp, unschedulable=True, rejected_by={"VGPU"})
    return qp.key


DELETED = ClusterEvent("pod", "delete", "n1")


def test_a_held_preemptor_is_woken_by_nothing_until_released() -> None:
    q, clock = make()
    key = _preempting(q)
    assert q.preempting() == 1
    q.on_event(DELETED)                 # one of its victims left
    q.add(info("p", 10))                # the pod itself changed
    clock.advance(301)                  # parked past max_unschedulable
    q.flush()
    assert q.pop() is None
    assert q.counts()["unschedulable"] == 1
    q.release(key)
    assert q.preempting() == 0
    # At once: the room its preemption made is held for it, idle, until it is tried.
    assert drain(q) == ["p"]


def test_a_released_preemptor_nothing_woke_waits_for_its_victims() -> None:
    q, _ = make()
    key = _preempting(q)
    q.release(key)
    assert q.pop() is None and q.counts()["unschedulable"] == 1
    q.on_event(DELETED)  # now its victims leave: no backoff
    assert drain(q) == ["p"]


def test_an_event_during_the_attempt_that_held_it_counts() -> None:
    q, clock = make()
    q.add(info("p", 10))
    qp = q.pop()
    assert qp is not None
    q.hold(qp.key)
    q.on_event(DELETED)  # mid-cycle: would send an unheld pod to backoff
    q.requeue(qp, unschedulable=True)
    clock.advance(5)
    assert q.pop() is None
    q.release(qp.key)
    assert drain(q) == ["p"]


def test_a_failed_preemption_backs_the_pod_off() -> None:
    q, clock = make()
    key = _preempting(q)
    qp = q.get(key)
    assert qp is not None and qp.attempts == 1
    q.release(key, failed="preemption: eviction of default/v refused")
    assert q.counts()["backoff"] == 1 and qp.attempts == 2
    assert qp.message == "preemption: eviction of default/v refused"
    assert q.pop() is None
    clock.advance(2)  # 1 s doubled
    assert drain(q) == ["p"]


def test_a_deleted_preemptor_is_forgotten() -> None:
    q, _ = make()
    key = _preempting(q)
    q.delete(key)
    assert q.preempting() == 0
    q.release(key, failed="too late")
    assert key not in q
