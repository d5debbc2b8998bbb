"""Fencing (issue 36, case 2): a replica writes only while its Lease was renewed within the
renew deadline by the local monotonic clock, and a replica that takes a Lease over waits
until the old holder's last writes can no longer land: its renew deadline and a write's
time in flight after this replica last saw it renew (issue 46)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.unit.test_leader import T0, FakeLeases
from vgpu.cluster.fence import Fence, FencedError, OpenFence
from vgpu.cluster.leader import ElectionConfig, LeaderElector, takeover_time


class Clock:
    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall = T0

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += dt.timedelta(seconds=seconds)


@pytest.mark.parametrize(("renewed", "now", "held"), [
    (None, 0.0, False),     # never renewed
    (100.0, 100.0, True),
    (100.0, 109.9, True),
    (100.0, 110.0, False),  # the deadline itself is too late
    (100.0, 500.0, False),  # woke from a long pause
])
def test_the_fence_holds_within_the_renew_deadline(renewed: float | None, now: float,
                                                   held: bool) -> None:
    fence = Fence(10.0, clock=lambda: now)
    if renewed is not None:
        fence.renewed(renewed)
    assert fence.held() is held
    if held:
        fence.check("bind")
    else:
        with pytest.raises(FencedError, match="bind: not sent"):
            fence.check("bind")


def test_an_older_renewal_answered_late_does_not_move_the_fence_back() -> None:
    fence = Fence(10.0, clock=lambda: 105.0)
    fence.renewed(100.0)
    fence.renewed(90.0)
    assert fence.held()
    fence.lose()
    assert not fence.held()


def test_the_open_fence_always_holds() -> None:
    OpenFence().check("bind")


def config(who: str, **kw: float) -> ElectionConfig:
    return ElectionConfig("ns", "lease", who, lease_duration=4, renew_deadline=3,
                          retry_period=0.5, **kw)


def test_the_renewal_moves_the_fence_from_when_it_was_sent() -> None:
    clock = Clock()
    store = FakeLeases()

    class Slow(FakeLeases):
        def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
            clock.advance(2.5)  # the answer takes 2.5 s
            return store.replace_lease(namespace, lease)

        def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
            return store.get_lease(namespace, name)

        def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
            return store.create_lease(namespace, lease)

    a = LeaderElector(Slow(), config("a"), clock=lambda: clock.wall,
                      monotonic=lambda: clock.mono)
    assert a.try_acquire_or_renew() and a.fence.held()
    sent = clock.mono
    assert a.try_acquire_or_renew()
    clock.advance(0.6)  # 3.1 s after the renewal was sent, 0.6 s after its answer
    assert clock.mono - sent == pytest.approx(3.1)
    assert not a.fence.held()


def electors(store: FakeLeases, clock: Clock, *who: str,
             in_flight: float = 5) -> list[LeaderElector]:
    return [LeaderElector(store, config(w, in_flight=in_flight), clock=lambda: clock.wall,
                          monotonic=lambda: clock.mono) for w in who]


def test_a_leader_paused_past_its_lease_is_fenced_when_it_wakes() -> None:
    clock = Clock()
    store = FakeLeases()
    a, b = electors(store, clock, "a", "b")
    assert a.try_acquire_or_renew() and a.takeover_wait() == 0.0
    clock.advance(0.2)
    assert not b.try_acquire_or_renew()
    clock.advance(0.8)
    assert a.try_acquire_or_renew()  # a's last renewal, sent at 1001.0
    assert a.takeover_not_before is None  # renewing its own Lease: no wait
    clock.advance(0.5)
    assert not b.try_acquire_or_renew()  # b sees that renewal at 1001.5
    seen = clock.mono
    clock.advance(1.5)
    assert not b.try_acquire_or_renew()  # the same record: still seen at 1001.5
    clock.advance(3.0)  # a is frozen; its lease (4 s) ran out at 1005.0
    assert b.try_acquire_or_renew()
    # b acts once a's fence (3 s from a renewal sent before b saw it) and a write's time
    # in flight (5 s) have passed, counted from when b saw a's last renewal.
    assert b.takeover_not_before == pytest.approx(seen + 3 + 5)
    assert b.takeover_wait() == pytest.approx(seen + 3 + 5 - clock.mono)
    # a wakes: whatever its threads do first, a write is refused.
    with pytest.raises(FencedError):
        a.fence.check("bind pod q")
    assert not a.try_acquire_or_renew()


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, None),
    ({"holderIdentity": "", "renewTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 1}, None),  # given up cleanly: nothing in flight
    ({"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 15}, 500.0 + 10 + 5),
    # The record's times are another clock's: they change nothing.
    ({"holderIdentity": "a", "renewTime": "2020-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 15}, 500.0 + 10 + 5),
    ({"holderIdentity": "a", "renewTime": "garbage", "leaseDurationSeconds": 15},
     500.0 + 10 + 5),
])
def test_takeover_time(spec: dict[str, Any], expected: float | None) -> None:
    assert takeover_time(spec, 500.0, 10, 5) == expected


@pytest.mark.parametrize("who", ["b", "a"])
def test_a_replica_first_seeing_a_held_lease_counts_from_then(who: str) -> None:
    """A replica started after the holder died (``b``, or the holder's own identity in a
    new process, ``a``: a restart) cannot know when the holder last renewed: it counts
    from its first sight of the record, whatever the record's renewTime says."""
    clock = Clock()
    store = FakeLeases()
    (a,) = electors(store, clock, "a")
    assert a.try_acquire_or_renew()
    clock.advance(60)  # a died long ago
    (fresh,) = electors(store, clock, who)
    first_sight = clock.mono
    assert fresh.try_acquire_or_renew()
    assert fresh.takeover_not_before == pytest.approx(first_sight + 3 + 5)
    clock.advance(0.5)
    assert fresh.takeover_wait() == pytest.approx(3 + 5 - 0.5)
    assert fresh.try_acquire_or_renew()  # its own renewal moves nothing
    assert fresh.takeover_not_before == pytest.approx(first_sight + 3 + 5)


def test_a_lease_given_up_cleanly_is_taken_over_at_once() -> None:
    clock = Clock()
    store = FakeLeases()
    (a,) = electors(store, clock, "a")
    assert a.try_acquire_or_renew()
    a._release()
    (b,) = electors(store, clock, "b")
    clock.advance(2)  # the released lease lasts 1 s
    assert b.try_acquire_or_renew()
    assert b.takeover_not_before is None
    assert b.takeover_wait() == 0.0
