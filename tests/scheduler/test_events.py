"""Events: which repeats go out, and the port that sends them from a worker thread."""

from __future__ import annotations

import itertools
import threading
from typing import Literal

import pytest

from tests.scheduler.helpers import FakeClock
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.errors import ClusterError
from vgpu_scheduler.host.event_recorder import EventLimiter, RecordingPort

F = "FailedScheduling"


# (seconds after the previous step, object, reason, message, expected)
SPACING = [
    (0, "p", F, "no room", True),  # the first goes out at once
    (1, "p", F, "no room", False),  # a repeat within 10 s is held back
    (9, "p", F, "no room", True),  # 10 s later it goes out; next spacing 20 s
    (10, "p", F, "no room", False),
    (10, "p", F, "no room", True),  # 20 s; next 40 s
    (39, "p", F, "no room", False),
    (1, "p", F, "no room", True),  # 40 s; next 80 s
    (5, "p", F, "other reason", False),  # a new message, but too soon after the last
    (5, "p", F, "other reason", True),  # 10 s after: out, and the spacing starts over
    (10, "p", F, "other reason", True),
    (0, "q", F, "no room", True),  # other pods are not held back by p
    (0, "p", "Scheduled", "assigned", True),  # nor other reasons
]


def test_repeats_are_spaced_exponentially() -> None:
    clock = FakeClock(0.0)
    limiter = EventLimiter(base=10, cap=600, clock=clock)
    got = []
    for wait, obj, reason, message, _ in SPACING:
        clock.advance(wait)
        got.append(limiter.allow(obj, reason, message))
    assert got == [expected for *_, expected in SPACING]


def test_spacing_is_capped_and_forgetting_starts_over() -> None:
    clock = FakeClock(0.0)
    limiter = EventLimiter(base=10, cap=30, clock=clock)
    sent = []
    for _ in range(200):
        clock.advance(1)
        if limiter.allow("p", F, "same"):
            sent.append(clock.now)
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert gaps[:3] == [10, 20, 30] and set(gaps[3:]) == {30}
    limiter.forget("p", (F,))
    assert limiter.allow("p", F, "same")


def test_the_limiter_forgets_the_oldest_objects_first() -> None:
    limiter = EventLimiter(max_keys=3, clock=FakeClock(0.0))
    for obj in "abcd":
        assert limiter.allow(obj, F, "m")
    assert len(limiter) == 3
    assert limiter.allow("a", F, "m")  # evicted, so it is news again
    assert not limiter.allow("d", F, "m")


class Refusing(MemoryCluster):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()

    def record_event(self, obj: Obj, event_type: Literal["Normal", "Warning"], reason: str,
                     message: str, component: str) -> None:
        self.gate.wait(10)
        if reason == "Refused":
            raise ClusterError("no (HTTP 500)")
        super().record_event(obj, event_type, reason, message, component)


@pytest.fixture
def pod() -> Obj:
    obj = builders.pod("p")
    obj["metadata"]["uid"] = "uid-p"
    return obj


def test_events_are_sent_from_a_worker_with_outcomes_counted(pod: Obj) -> None:
    cluster = Refusing()
    outcomes: list[str] = []
    port = RecordingPort(cluster, limiter=EventLimiter(clock=FakeClock(0.0)),
                         outcome=outcomes.append)
    try:
        port.record_event(pod, "Warning", F, "0/1 nodes are available.", "vgpu-scheduler")
        port.record_event(pod, "Warning", F, "0/1 nodes are available.", "vgpu-scheduler")
        port.record_event(pod, "Warning", "Refused", "x", "vgpu-scheduler")
        port.record_event(pod, "Normal", "Scheduled", "assigned", "vgpu-scheduler")
        assert port.flush()
    finally:
        port.close()
    assert sorted(outcomes) == ["failed", "limited", "sent", "sent"]
    assert [(e.reason, e.message) for e in cluster.events(name="p")] == [
        (F, "0/1 nodes are available."), ("Scheduled", "assigned")]
    # Scheduled ends the pod's story: a later failure (a new pod of the same name, say)
    # is news again.
    assert port.limiter.allow("uid-p", F, "0/1 nodes are available.")


def test_a_full_queue_drops_events_instead_of_waiting(pod: Obj) -> None:
    cluster = Refusing()
    cluster.gate.clear()  # the API server hangs
    outcomes: list[str] = []
    port = RecordingPort(cluster, limiter=EventLimiter(base=0, clock=FakeClock(0.0)),
                         max_queued=2, outcome=outcomes.append)
    try:
        for i in range(6):
            port.record_event(pod, "Warning", F, f"message {i}", "vgpu-scheduler")
        assert outcomes.count("dropped") >= 3
    finally:
        cluster.gate.set()
        port.close()
    assert len(cluster.events(name="p")) + outcomes.count("dropped") == 6


def test_everything_else_passes_through(pod: Obj) -> None:
    cluster = MemoryCluster()
    port = RecordingPort(cluster)
    cluster.create("nodes", builders.node("n1"))
    port.create("pods", pod)
    assert [p["metadata"]["name"] for p in port.list("pods").items] == ["p"]
    port.patch_annotations("pods", "p", {"a": "b"}, "default")
    port.bind("default", "p", "n1", {"c": "d"})
    got = port.get("pods", "p", "default")
    assert got["spec"]["nodeName"] == "n1"
    assert got["metadata"]["annotations"] == {"a": "b", "c": "d"}
    port.replace("pods", got)
    port.delete("pods", "p", "default")
    assert not port.list("pods").items
    port.close()  # never started: nothing to stop
