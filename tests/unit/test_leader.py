from __future__ import annotations

import copy
import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from vgpu.cluster.leader import (
    ClusterLeaseStore,
    ElectionConfig,
    LeaderElector,
    LeaseStore,
    lease_expired,
)
from vgpu.cluster.memory import MemoryCluster
from vgpu.errors import ClusterError, ConflictError, NotFoundError


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


# --- on the in-memory cluster, through the cluster port -----------------------------------

def test_two_electors_on_one_memory_cluster() -> None:
    cluster, now = MemoryCluster(), [T0]
    store = ClusterLeaseStore(cluster)
    a, b = (LeaderElector(store, ElectionConfig("kube-system", "sched", who, lease_duration=15),
                          clock=lambda: now[0]) for who in ("a", "b"))
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    lease = cluster.get("leases", "sched", "kube-system")
    assert lease["spec"]["holderIdentity"] == "a"
    now[0] = T0 + dt.timedelta(seconds=10)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    seen_by_a = cluster.get("leases", "sched", "kube-system")
    # a stops renewing: once its renewal at 10 s has lapsed, b takes over.
    now[0] = T0 + dt.timedelta(seconds=26)
    assert b.try_acquire_or_renew()
    assert not a.try_acquire_or_renew()
    lease = cluster.get("leases", "sched", "kube-system")
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("b", 1)
    # Every write is conditional: one from the version a last read conflicts.
    with pytest.raises(ConflictError):
        store.replace_lease("kube-system", seen_by_a)


class Partitionable:
    """A lease store that stops answering once ``cut`` is set, as for a leader that lost
    the API server: it can no longer renew."""

    def __init__(self, inner: LeaseStore) -> None:
        self.inner = inner
        self.cut = threading.Event()

    def _check(self) -> None:
        if self.cut.is_set():
            raise ClusterError("connection refused")

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self._check()
        return self.inner.get_lease(namespace, name)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        self._check()
        return self.inner.create_lease(namespace, lease)

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        self._check()
        return self.inner.replace_lease(namespace, lease)


def test_running_electors_have_one_leader_and_a_takeover_when_it_stops_renewing() -> None:
    cluster = MemoryCluster()
    stores = {who: Partitionable(ClusterLeaseStore(cluster)) for who in ("a", "b")}
    electors = {who: LeaderElector(store, ElectionConfig(
        "ns", "sched", who, lease_duration=2, renew_deadline=0.5, retry_period=0.05))
        for who, store in stores.items()}
    stopped: list[str] = []
    stop = threading.Event()
    threads = [threading.Thread(target=e.run, args=(stop, lambda: None,
                                                    lambda who=who: stopped.append(who)),
                                daemon=True) for who, e in electors.items()]
    overlap = False

    def wait_for(check: Callable[[], bool], seconds: float) -> bool:
        nonlocal overlap
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            overlap |= all(e.is_leader.is_set() for e in electors.values())
            if check():
                return True
            time.sleep(0.01)
        return False

    for thread in threads:
        thread.start()
    try:
        assert wait_for(lambda: any(e.is_leader.is_set() for e in electors.values()), 5)
        leader = next(who for who, e in electors.items() if e.is_leader.is_set())
        other = "b" if leader == "a" else "a"
        assert not wait_for(electors[other].is_leader.is_set, 0.5)
        stores[leader].cut.set()
        assert wait_for(electors[other].is_leader.is_set, 10)
        assert not electors[leader].is_leader.is_set() and stopped == [leader]
        holder = cluster.get("leases", "sched", "ns")["spec"]["holderIdentity"]
        assert holder == other
        assert not overlap
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
    # A clean stop gives the Lease up at once.
    assert cluster.get("leases", "sched", "ns")["spec"]["holderIdentity"] == ""
