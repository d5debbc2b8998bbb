"""The cache under the races of issue 31: kube-scheduler's invariants, keyed by uid.

``assume`` never replaces a pod the watch showed bound; ``forget`` and ``finish_binding``
act on the assumption they are given and nothing that replaced it; a pod deleted and
recreated under its name is another pod; a nominated pod bound by someone else counts as
bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.scheduler.test_cache import NOW, assignment, bound, cache_with
from vgpu import builders
from vgpu.config import Config
from vgpu.devices import Usage
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.pod_records import PodRecord
from vgpu_scheduler.host.room import BOUND, Refused

A0 = assignment("n1", "GPU-n1-0", 16000, 100)
B0 = assignment("n2", "GPU-n2-0", 16000, 100)


def pending(name: str = "p", uid: str = "uid-1") -> PodInfo:
    pod = builders.pod(name, [builders.container(cpu="1", memory="1Gi")])
    pod["metadata"]["uid"] = uid
    return parse(pod, Config())


def bound_as(node: str, a: Any, uid: str = "uid-1", name: str = "p") -> dict[str, Any]:
    pod = bound(name, node, a)
    pod["metadata"]["uid"] = uid
    return pod


def usage(cache: Cache, node: str) -> Usage:
    info = cache.node_info(node)
    assert info is not None
    return info.usages[0]


def test_a_pod_the_watch_shows_bound_is_not_assumed_over() -> None:
    # Case 1 of issue 31: bound on n1 by another binder while its cycle ran.
    cache = cache_with("n1", "n2")
    cache.set_pod(bound_as("n1", A0))
    assert cache.assume(pending(), "n2", B0) is BOUND
    rec = cache.pod("uid-1")
    assert rec is not None and rec.node == "n1" and not rec.assumed
    assert usage(cache, "n1") == Usage(16000, 100, 1) and usage(cache, "n2") == Usage()


def test_forget_leaves_what_replaced_its_assumption() -> None:
    cache = cache_with("n1", "n2")
    mine = cache.assume(pending(), "n2", B0)
    assert isinstance(mine, PodRecord)
    cache.set_pod(bound_as("n1", A0))  # another binder won: the watch tells
    assert not cache.forget(mine)
    cache.finish_binding(mine, NOW)  # nothing to start either
    assert cache.expire(NOW + 10_000) == []
    assert usage(cache, "n1") == Usage(16000, 100, 1) and usage(cache, "n2") == Usage()


def test_a_same_name_successor_is_another_pod() -> None:
    # Case 2 of issue 31: p is assumed, deleted, recreated (another uid) and assumed too.
    cache = cache_with("n1")
    old = cache.assume(pending(uid="uid-1"), "n1", assignment("n1", "GPU-n1-0", 2000, 20))
    assert isinstance(old, PodRecord)
    cache.finish_binding(old, NOW)  # its binding returned
    new = cache.assume(pending(uid="uid-2"), "n1", assignment("n1", "GPU-n1-0", 12000, 80))
    assert isinstance(new, PodRecord)
    assert usage(cache, "n1") == Usage(14000, 100, 2)
    assert cache.remove_pod("uid-1") is old  # the watch: the first one is gone
    assert not cache.forget(old)
    assert usage(cache, "n1") == Usage(12000, 80, 1)
    info = cache.node_info("n1")
    assert info is not None and list(info.pods) == ["uid-2"]


def test_a_deleted_pods_room_is_held_while_its_binding_may_land() -> None:
    # A server before 1.23 binds whatever pod has the name: a successor gets these slices.
    cache = cache_with("n1")
    rec = cache.assume(pending(), "n1", A0)
    assert isinstance(rec, PodRecord)
    assert cache.remove_pod("uid-1") is None  # deleted while its binding is in flight
    assert usage(cache, "n1") == Usage(16000, 100, 1)
    assert cache.forget(rec)  # the binding failed: gone
    assert usage(cache, "n1") == Usage()


def test_a_successor_bound_with_a_predecessors_slices_takes_over_its_assumption() -> None:
    # The predecessor's Binding landed on the successor (a server before 1.23): the
    # successor's record counts the slices, the assumption goes, nothing twice.
    cache = cache_with("n1", "n2")
    rec = cache.assume(pending(), "n1", A0)
    assert isinstance(rec, PodRecord)
    assert cache.remove_pod("uid-1") is None
    cache.finish_binding(rec, NOW)
    cache.set_pod(bound_as("n1", A0, uid="uid-2"))
    assert cache.pod("uid-1") is None and usage(cache, "n1") == Usage(16000, 100, 1)
    assert not cache.forget(rec)  # gone already: nothing to undo
    # Another pod of the name, or other slices, leave an assumption alone.
    mine = cache.assume(pending(uid="uid-3"), "n2", B0)
    assert isinstance(mine, PodRecord)
    cache.set_pod(bound_as("n2", B0, uid="uid-4", name="other"))
    cache.set_pod(bound_as("n1", A0, uid="uid-5"))
    assert cache.pod("uid-3") is mine


def test_slices_that_filled_up_during_the_cycle_are_not_assumed() -> None:
    cache = cache_with("n1")
    cache.set_pod(bound_as("n1", assignment("n1", "GPU-n1-0", 30000, 50), uid="other",
                           name="other"))
    refused = cache.assume(pending(), "n1", assignment("n1", "GPU-n1-0", 12000, 30))
    assert isinstance(refused, Refused) and not refused.bound
    assert "insufficient GPU memory" in refused.reason
    assert usage(cache, "n1") == Usage(30000, 50, 1)
    # What still fits is assumed, on top of it.
    assert isinstance(cache.assume(pending(), "n1", assignment("n1", "GPU-n1-0", 10000, 30)),
                      PodRecord)


def test_a_nominated_pod_bound_by_someone_else_counts_as_bound() -> None:
    cache = cache_with("n1")
    cache.nominate(pending(), "n1", A0)
    cache.set_pod(bound_as("n1", A0))  # exactly its claim
    info = cache.node_info("n1")
    assert info is not None and not info.pods["uid-1"].nominated
    rec = cache.pod("uid-1")
    assert rec is not None and not rec.nominated and not rec.assumed
    assert usage(cache, "n1") == Usage(16000, 100, 1)


Step = Callable[[Cache], object]


@pytest.mark.parametrize(("steps", "n1", "n2"), [
    # assumed, then the watch shows the binding: counted once
    ([lambda c: c.assume(pending(), "n1", A0), lambda c: c.set_pod(bound_as("n1", A0))],
     Usage(16000, 100, 1), Usage()),
    # assumed on n2, bound on n1 by another binder: counted where it is
    ([lambda c: c.assume(pending(), "n2", B0), lambda c: c.set_pod(bound_as("n1", A0))],
     Usage(16000, 100, 1), Usage()),
    # an unanswered binding's assumption is replaced by the next attempt's
    ([lambda c: c.assume(pending(), "n2", B0), lambda c: c.assume(pending(), "n1", A0)],
     Usage(16000, 100, 1), Usage()),
    # a nomination is replaced by the assumption
    ([lambda c: c.nominate(pending(), "n2", B0), lambda c: c.assume(pending(), "n1", A0)],
     Usage(16000, 100, 1), Usage()),
    # bound, then deleted under another uid's name: the deletion of uid-2 takes nothing
    ([lambda c: c.set_pod(bound_as("n1", A0)), lambda c: c.remove_pod("uid-2")],
     Usage(16000, 100, 1), Usage()),
], ids=["confirmed", "bound elsewhere", "assumed again", "nominated then assumed",
        "other uid deleted"])
def test_every_pod_is_counted_once(steps: list[Step], n1: Usage, n2: Usage) -> None:
    cache = cache_with("n1", "n2")
    for step in steps:
        step(cache)
    assert (usage(cache, "n1"), usage(cache, "n2")) == (n1, n2)
