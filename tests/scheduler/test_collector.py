"""The cyclic collector around the scheduler's initial list (vgpu_scheduler.host.collector)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import ALL, Kind, ListResult, Selector
from vgpu.config import Config
from vgpu_scheduler.host import collector
from vgpu_scheduler.host.scheduler import Scheduler


@pytest.fixture
def enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.parametrize("before", [True, False])
def test_paused_restores_the_collector_as_it_was(enabled: None, before: bool) -> None:
    if not before:
        gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled() is before


def test_paused_restores_it_when_the_body_raises(enabled: None) -> None:
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_promote_leaves_what_was_frozen_frozen() -> None:
    kept = [[]]  # a tracked object that exists now
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        collector.promote()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    assert gc.is_tracked(kept[0])


def test_promote_freezes_nothing() -> None:
    if gc.get_freeze_count():
        pytest.skip("something froze objects before this test")
    collector.promote()
    assert gc.get_freeze_count() == 0


def test_the_first_pump_folds_the_listed_pods_in_and_leaves_the_collector_on(
        enabled: None) -> None:
    cluster = MemoryCluster()
    cluster.create("nodes", builders.node("n1", builders.devices("n1", 2)))
    sched = Scheduler(Config(), cluster, clock=lambda: 1000.0)
    sched.pump()
    assert gc.isenabled()
    assert sched.snapshot.get("n1") is not None
    # Nothing left for the first cycle to copy in.
    assert sched.cache.update_snapshot(sched.snapshot) == 0


def test_paused_resumes_early_when_asked(enabled: None) -> None:
    with collector.paused() as resume:
        assert not gc.isenabled()
        resume()
        assert gc.isenabled()
        resume()  # twice is once
    assert gc.isenabled()


class _SlowToList(MemoryCluster):
    """A cluster whose pod list blocks until ``release`` is set: an informer that has not
    synced yet."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult:
        if kind == "pods":
            self.release.wait(10)
        return super().list(kind, selector)


@pytest.mark.parametrize(("timeout", "longest", "resumed"), [
    (None, 60.0, False),
    (0.2, 60.0, True),
    # No warning timeout: the pause still ends.
    (None, 0.2, True),
])
def test_run_pauses_the_collector_until_synced_or_the_sync_timeout(
        enabled: None, monkeypatch: pytest.MonkeyPatch, timeout: float | None,
        longest: float, resumed: bool) -> None:
    monkeypatch.setattr(collector, "LONGEST_PAUSE_SECONDS", longest)
    cluster = _SlowToList()
    cluster.create("nodes", builders.node("n1", builders.devices("n1", 2)))
    sched = Scheduler(Config(), cluster, clock=time.time)
    stop = threading.Event()
    thread = threading.Thread(target=sched.run, args=(stop,),
                              kwargs={"watch_timeout": 0.2, "sync_timeout": timeout})
    thread.start()
    try:
        time.sleep(0.6)
        # Still listing: paused, unless the wait outlasted its timeout or the longest pause.
        assert gc.isenabled() is resumed
        cluster.release.set()
        deadline = time.monotonic() + 10
        while not sched.synced() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        assert gc.isenabled()
    finally:
        cluster.release.set()
        stop.set()
        thread.join(timeout=10)
        gc.unfreeze()
    assert not thread.is_alive()
