"""A preemption's API calls run off the scheduling loop (kube's asynchronous preemption):
other pods keep being placed while its evictions are slow, the preemptor waits for them,
and calls that fail give its nomination up and try it again after a backoff."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tests.scheduler.e2e_support import gpu_node, node_of, uid_of
from tests.scheduler.helpers import FakeClock
from tests.scheduler.test_preemption_e2e import Kubelet, messages, start, status
from tests.scheduler.test_preemption_gpu import on_gpu
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu.errors import ClusterError, OutcomeUnknownError
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.kube.default_preemption import DefaultPreemption

WHOLE = builders.container(percent=100)


class SlowEvictions(MemoryCluster):
    """An API server that takes until ``answer`` is set to answer an eviction."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = threading.Event()
        self.asked = threading.Event()

    def evict(self, namespace: str, name: str, *, uid: str = "") -> None:
        self.asked.set()
        if not self.answer.wait(60):
            raise ClusterError("no answer")
        super().evict(namespace, name, uid=uid)


def _until(check: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_other_pods_are_placed_while_a_preemptions_evictions_are_slow() -> None:
    cluster = SlowEvictions()
    now = time.time()
    # n1's only GPU is taken by a low-priority pod; n2's is too small for the preemptor.
    cluster.create("nodes", gpu_node("n1", 1, memory_mib=16384, heartbeat=now))
    cluster.create("nodes", gpu_node("n2", 1, memory_mib=8192, heartbeat=now))
    cluster.create("pods", on_gpu("low", "n1", 0, 16384, priority=0))
    sched = Scheduler(Config(scheduler=SchedulerConfig(
        bind_workers=2, pod_initial_backoff_seconds=0.1, pod_max_backoff_seconds=0.2)),
        cluster)
    stop = threading.Event()
    thread = threading.Thread(target=sched.run, args=(stop,), kwargs={"watch_timeout": 0.2})
    thread.start()
    try:
        cluster.create("pods", builders.pod("high", [builders.container(gpumem=16000)],
                                            priority=100))
        assert cluster.asked.wait(30), "the preemption never evicted"
        # The eviction hangs; the scheduling loop does not.
        for name in ("a", "b"):
            cluster.create("pods", builders.pod(name, [builders.container(gpumem=100)]))
        assert _until(lambda: node_of(cluster, "a") == node_of(cluster, "b") == "n2")
        assert not cluster.answer.is_set() and node_of(cluster, "low") == "n1"
        assert sched.queue.preempting() == 1
        held = sched.cache.pod(uid_of(cluster, "high"))
        assert held is not None and held.nominated and held.node == "n1"

        cluster.answer.set()
        assert _until(lambda: node_of(cluster, "high") == "n1")
    finally:
        cluster.answer.set()
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert len(messages(cluster, "low", "Preempted")) == 1


class FailingOnce(Kubelet):
    """The first eviction's answer is lost; later ones go through."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def evict(self, namespace: str, name: str, *, uid: str = "") -> None:
        if self.failures:
            self.failures -= 1
            raise OutcomeUnknownError(f"evict pod {namespace}/{name}: connection reset")
        super().evict(namespace, name, uid=uid)


def _world() -> tuple[FailingOnce, Scheduler, FakeClock]:
    cluster = FailingOnce()
    sched, clock = start(cluster, gpu_node("n1", 1))
    cluster.create("pods", on_gpu("low", "n1", 0, 4000, priority=0))
    cluster.create("pods", on_gpu("other", "n1", 0, 4000, priority=0))
    return cluster, sched, clock


def test_a_failed_eviction_un_nominates_the_preemptor_and_it_is_retried() -> None:
    cluster, sched, clock = _world()
    cluster.create("pods", builders.pod("high", [WHOLE], priority=100))
    sched.run_until_idle()
    uid = uid_of(cluster, "high")
    # The first victim's eviction failed: no room held, no nomination shown, why in its
    # events, and the pod backs off.
    assert sched.cache.pod(uid) is None
    assert "nominatedNodeName" not in status(cluster, "high")
    assert messages(cluster, "high", "FailedScheduling") == [
        "0/1 nodes are available: 1 insufficient GPU memory. preemption: evicting "
        "default/low failed: evict pod default/low: connection reset."]
    assert sched.queue.counts()["backoff"] == 1 and sched.queue.preempting() == 0
    plugin = next(p for p in sched.framework.plugins if isinstance(p, DefaultPreemption))
    assert plugin.started.get(uid) is None
    # Retried after its backoff: both victims go, the pod is nominated and holds the room.
    clock.advance(2)
    sched.run_until_idle()
    assert status(cluster, "high")["nominatedNodeName"] == "n1"
    held = sched.cache.pod(uid)
    assert held is not None and held.nominated
    for name in ("low", "other"):
        assert cluster.get("pods", name, "default")["metadata"].get("deletionTimestamp")
        cluster.finish(name)
    clock.advance(5)
    sched.run_until_idle()
    assert node_of(cluster, "high") == "n1"


def test_a_failure_clears_the_nomination_an_earlier_preemption_showed() -> None:
    cluster, sched, clock = _world()
    cluster.failures = 0
    cluster.create("pods", builders.pod("mid", [WHOLE], priority=50))
    sched.run_until_idle()
    assert status(cluster, "mid")["nominatedNodeName"] == "n1"
    # Its victims are gone, but a higher-priority pod bound meanwhile takes the GPU back...
    for name in ("low", "other"):
        cluster.finish(name)
    cluster.create("pods", on_gpu("top", "n1", 0, 4000, priority=10))
    # ...and mid's next preemption (top is lower than mid) fails: its nomination goes.
    cluster.failures = 1
    clock.advance(5)
    sched.run_until_idle()
    assert "nominatedNodeName" not in status(cluster, "mid")
    assert sched.cache.pod(uid_of(cluster, "mid")) is None
    assert node_of(cluster, "top") == "n1"
