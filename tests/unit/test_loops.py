"""No silent thread death (issue 36): a loop's failed round is logged, counted and
survived; a loop that gives up ends its thread as failed, which /healthz reports; a watch
that keeps failing lists again, and ends only after many failures in a row."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from vgpu import loops
from vgpu.cluster.informer import GIVE_UP, Informer
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import ALL, Kind, Selector, WatchEvent


def test_a_failed_round_is_counted_and_survived() -> None:
    before = loops.errors().get("t-round", 0)
    assert loops.survive("t-round", lambda: 1 / 0) is False
    assert loops.survive("t-round", lambda: None) is True
    assert loops.errors()["t-round"] == before + 1
    family = next(iter(loops.Collector("vgpu_test").collect()))
    assert family.name == "vgpu_test_loop_errors"
    assert ("t-round",) in {tuple(s.labels.values()) for s in family.samples}


@pytest.mark.parametrize(("target", "failed"), [
    (lambda: None, False),          # nothing to do: returning is no failure
    (lambda: int("no"), True),
])
def test_a_loop_thread_that_raises_is_failed(target: Any, failed: bool) -> None:
    thread = loops.thread("t-loop", target)
    thread.start()
    thread.join(5)
    assert thread.failed is failed
    assert loops.dead([thread, threading.current_thread()]) == (["t-loop"] if failed else [])


class Garbled(MemoryCluster):
    """A cluster whose watch answers ``bad`` times with what no API server sends."""

    def __init__(self, bad: int) -> None:
        super().__init__()
        self.bad = bad
        self.lists = 0

    def list(self, kind: Kind, selector: Selector = ALL) -> Any:
        self.lists += 1
        return super().list(kind, selector)

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        if self.bad > 0:
            self.bad -= 1
            raise ValueError("unexpected character in the watch's answer")
        return super().watch(kind, resource_version, selector, min(timeout_seconds, 0.05))


def run_informer(cluster: Garbled, until: Any) -> tuple[Informer, threading.Thread]:
    stop = threading.Event()
    informer = Informer(cluster, "pods", watch_timeout=0.05, max_backoff=0.001)
    thread = informer.start(stop, "t-informer")
    deadline = threading.Event()
    for _ in range(500):
        if until(informer, thread):
            break
        deadline.wait(0.01)
    stop.set()
    thread.join(5)
    return informer, thread


def test_a_watch_that_fails_lists_again_and_goes_on() -> None:
    cluster = Garbled(bad=3)
    cluster.create("pods", {"metadata": {"name": "a", "namespace": "default"}})
    before = loops.errors().get("informer (pods)", 0)
    informer, thread = run_informer(cluster, lambda i, t: cluster.bad == 0 and cluster.lists > 3)
    assert not getattr(thread, "failed", False)
    assert loops.errors()["informer (pods)"] == before + 3
    assert cluster.lists >= 4  # the first list, then one after each failure
    assert [p["metadata"]["name"] for p in informer.items()] == ["a"]


def test_a_watch_that_keeps_failing_ends_its_thread_as_failed() -> None:
    cluster = Garbled(bad=GIVE_UP + 5)
    _, thread = run_informer(cluster, lambda i, t: not t.is_alive())
    assert loops.dead([thread]) == ["t-informer"]
