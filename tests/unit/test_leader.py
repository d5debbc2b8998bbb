from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from vgpu.errors import ConflictError, NotFoundError
from vgpu.kube.leader import ElectionConfig, LeaderElector, lease_expired


class FakeLeases:
    """Leases with the API server's conditional-update rule, at the transport seam."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        if self.lease is None:
            raise NotFoundError("lease not found")
        return copy.deepcopy(self.lease)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        if self.lease is not None:
            raise ConflictError("exists")
        self.rv += 1
        self.lease = copy.deepcopy(lease)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        assert self.lease is not None
        if lease["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ConflictError("stale")
        self.rv += 1
        self.lease = copy.deepcopy(lease)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)


T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def elector(store: FakeLeases, who: str, now: list[dt.datetime]) -> LeaderElector:
    return LeaderElector(store, ElectionConfig("ns", "vgpu-scheduler", who, lease_duration=15),
                         clock=lambda: now[0])


def test_first_candidate_wins_second_waits_until_expiry() -> None:
    store, now = FakeLeases(), [T0]
    a, b = elector(store, "a", now), elector(store, "b", now)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert b.observed_holder == "a"
    now[0] = T0 + dt.timedelta(seconds=10)
    assert a.try_acquire_or_renew()  # renewal keeps it
    now[0] = T0 + dt.timedelta(seconds=24)
    assert not b.try_acquire_or_renew()  # renewed at 10 s, valid to 25 s
    now[0] = T0 + dt.timedelta(seconds=26)
    assert b.try_acquire_or_renew()
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == "b"
    assert store.lease["spec"]["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()


def test_racing_takeover_has_one_winner() -> None:
    store, now = FakeLeases(), [T0]
    elector(store, "a", now).try_acquire_or_renew()
    now[0] = T0 + dt.timedelta(seconds=60)
    b, c = elector(store, "b", now), elector(store, "c", now)
    lease_seen_by_c = store.get_lease("ns", "x")
    assert b.try_acquire_or_renew()
    # c acts on the version it read before b's write: the conditional update must fail.
    with pytest.raises(ConflictError):
        store.replace_lease("ns", lease_seen_by_c)
    assert not c.try_acquire_or_renew()


@pytest.mark.parametrize(("spec", "seconds", "expired"), [
    ({}, 0, True),
    ({"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 15}, 14, False),
    ({"holderIdentity": "a", "renewTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 15}, 16, True),
    ({"holderIdentity": "", "renewTime": "2026-01-01T00:00:00.000000Z",
      "leaseDurationSeconds": 15}, 1, True),
    ({"holderIdentity": "a", "renewTime": "garbage", "leaseDurationSeconds": 15}, 1, True),
])
def test_lease_expired(spec: dict[str, Any], seconds: int, expired: bool) -> None:
    assert lease_expired(spec, T0 + dt.timedelta(seconds=seconds)) is expired
