"""Fencing (issue 36, case 2): a replica writes only while its Lease was renewed within the
renew deadline by the local monotonic clock, and a replica that takes a Lease over waits
until the old holder's last writes can no longer land."""

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


def test_a_leader_paused_past_its_lease_is_fenced_when_it_wakes() -> None:
    clock = Clock()
    store = FakeLeases()
    a = LeaderElector(store, config("a", in_doubt=5), clock=lambda: clock.wall,
                      monotonic=lambda: clock.mono)
    b = LeaderElector(store, config("b", in_doubt=5), clock=lambda: clock.wall,
                      monotonic=lambda: clock.mono)
    assert a.try_acquire_or_renew() and a.takeover_wait() == 0.0
    clock.advance(1)
    assert a.try_acquire_or_renew()
    last_renewal = clock.wall
    clock.advance(4.5)  # a is frozen; its lease ran out
    assert b.try_acquire_or_renew()
    # b may act only once a's last renewal + lease duration + in doubt has passed.
    assert b.takeover_not_before == last_renewal + dt.timedelta(seconds=4 + 5)
    assert b.takeover_wait() == pytest.approx(4 + 5 - 4.5)
    # a wakes: whatever its threads do first, a write is refused.
    with pytest.raises(FencedError):
        a.fence.check("bind pod q")
    assert not a.try_acquire_or_renew()


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, None),
    ({"holderIdentity": "", "renewTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 1}, None),  # given up cleanly: nothing in flight
    ({"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 15}, T0 + dt.timedelta(seconds=15 + 35)),
    ({"holderIdentity": "a", "acquireTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 15}, T0 + dt.timedelta(seconds=15 + 35)),
    ({"holderIdentity": "a", "renewTime": "garbage", "leaseDurationSeconds": 15}, None),
])
def test_takeover_time(spec: dict[str, Any], expected: dt.datetime | None) -> None:
    assert takeover_time(spec, 35) == expected


def test_a_lease_given_up_cleanly_is_taken_over_at_once() -> None:
    clock = Clock()
    store = FakeLeases()
    a = LeaderElector(store, config("a", in_doubt=5), clock=lambda: clock.wall,
                      monotonic=lambda: clock.mono)
    assert a.try_acquire_or_renew()
    a._release()
    b = LeaderElector(store, config("b", in_doubt=5), clock=lambda: clock.wall,
                      monotonic=lambda: clock.mono)
    clock.advance(2)  # the released lease lasts 1 s
    assert b.try_acquire_or_renew()
    assert b.takeover_wait() == 0.0
