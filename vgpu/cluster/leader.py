"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection.

The leader renews the Lease every ``retry_period``; a candidate takes it over once
``renewTime + leaseDurationSeconds`` has passed without a renewal. Every write is
conditional on the Lease's resourceVersion, so two candidates can never both win. A
leader that fails to renew within ``renew_deadline`` steps down before anyone else can
take over (renew_deadline < lease_duration), so there is never a moment with two leaders
acting.

Two more rules keep a Lease from being shared in practice, not only on paper (issue 36):
every successful renewal moves the elector's :class:`~vgpu.cluster.fence.Fence`, which the
replica checks before each write it sends, so a leader that wakes from a pause sends
nothing; and a replica that takes the Lease over from another holder (not given up
cleanly), or from its own identity's earlier process, learns when that holder's last
writes can no longer land (:attr:`LeaderElector.takeover_not_before`, :func:`takeover_time`),
before which it must not act. That moment is counted on this replica's monotonic clock
from when it last saw the holder renew, as client-go counts a lease's expiry (issue 46):
the holder's fence stopped its writes a renew deadline after it sent that renewal, and a
write it sent before then is in flight for ``in_flight`` seconds at most (its deadline).

The Lease is read and written through the cluster port, so an election runs the same on
the API server and on the in-memory cluster.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vgpu import logs, times
from vgpu.cluster.fence import Fence
from vgpu.cluster.port import ClusterPort
from vgpu.errors import ClusterError, CodecError, ConflictError, NotFoundError

_log = logs.get("vgpu.leader")


class LeaseStore(Protocol):
    def get_lease(self, namespace: str, name: str) -> dict[str, Any]: ...
    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]: ...
    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]: ...


class ClusterLeaseStore:
    """Leases through any :class:`vgpu.cluster.port.ClusterPort`.

    Give it a connection of its own on the API server (the scheduler does), so that no
    burst of other requests can delay a renewal past the renew deadline.
    """

    def __init__(self, port: ClusterPort) -> None:
        self._port = port

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return self._port.get("leases", name, namespace)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        return self._port.create("leases", _in(namespace, lease))

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        # The resourceVersion read stays in the metadata: a stale one is a ConflictError.
        return self._port.replace("leases", _in(namespace, lease))


def _in(namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
    """``lease`` in ``namespace``, whatever its metadata says (the store's namespace
    argument is the one the elector's config names)."""
    return {**lease, "metadata": {**(lease.get("metadata") or {}), "namespace": namespace}}


def _fmt(when: dt.datetime) -> str:
    return times.format_micro(when)


def _parse(text: str | None) -> dt.datetime | None:
    try:
        return times.parse(text)
    except CodecError:
        return None


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: The longest a write of a leader stays in flight (its deadline, counted from its
    #: fence check): what a new leader waits beyond the old one's renew deadline.
    in_flight: float = 0.0


def lease_expired(spec: dict[str, Any], now: dt.datetime) -> bool:
    """Whether a Lease's holder has let it lapse (pure, for tests)."""
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds") or 0
    if not spec.get("holderIdentity") or renewed is None:
        return True
    return now > renewed + dt.timedelta(seconds=float(duration))


def takeover_time(spec: dict[str, Any], observed_at: float, renew_deadline: float,
                  in_flight: float) -> float | None:
    """When (local monotonic time) the holder of ``spec`` can have nothing in flight any
    more, ``observed_at`` being when this replica last saw the Lease change (or first saw
    it): a renewal is sent before anyone can read it, so the holder's fence, held for
    ``renew_deadline`` from the sending of its last renewal, ran out by ``observed_at +
    renew_deadline`` at the latest, and every write it checked the fence for has landed
    or been given up ``in_flight`` later. Wall clocks are not read: another machine's
    ``renewTime`` may be skewed. None for a Lease given up cleanly or never held."""
    if not spec.get("holderIdentity"):
        return None
    return observed_at + renew_deadline + in_flight


class LeaderElector:
    def __init__(self, store: LeaseStore, config: ElectionConfig,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.config = config
        self._clock = clock
        self._monotonic = monotonic
        self.is_leader = threading.Event()
        self.observed_holder: str | None = None
        #: Checked before every write this replica sends (:mod:`vgpu.cluster.fence`).
        self.fence = Fence(config.renew_deadline, monotonic)
        #: Set on taking the Lease over from another holder (monotonic time): until
        #: then, that holder's last writes may still land, so this replica must not act.
        self.takeover_not_before: float | None = None
        # The Lease's spec as last seen and when it was first seen so (monotonic).
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        # Whether this elector's last attempt found it holding the Lease: a record naming
        # its identity that it does not hold is an earlier process's (a restart).
        self._holding = False

    def takeover_wait(self) -> float:
        """Seconds this replica must still wait before its first write as leader."""
        if self.takeover_not_before is None:
            return 0.0
        return max(0.0, self.takeover_not_before - self._monotonic())

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        sent = self._monotonic()
        won = self._attempt()
        self._holding = won
        if won:
            self.fence.renewed(sent)
        return won

    def _observe(self, spec: dict[str, Any]) -> None:
        """Note when the Lease was seen to change, after the read that shows it returned
        (by then every renewal it shows had been sent)."""
        if spec != self._observed:
            self._observed, self._observed_at = dict(spec), self._monotonic()

    def _takeover(self, spec: dict[str, Any]) -> float | None:
        """When this replica may act after acquiring the Lease whose spec it read: None
        at once (it was holding it, or the Lease was given up cleanly)."""
        if self._holding and spec.get("holderIdentity") == self.config.identity:
            return None
        cfg = self.config
        return takeover_time(spec, self._observed_at, cfg.renew_deadline, cfg.in_flight)

    def _attempt(self) -> bool:
        cfg = self.config
        now = self._clock()
        try:
            lease = self.store.get_lease(cfg.namespace, cfg.name)
        except NotFoundError:
            new_spec = {"holderIdentity": cfg.identity,
                    "leaseDurationSeconds": int(cfg.lease_duration),
                    "acquireTime": _fmt(now), "renewTime": _fmt(now), "leaseTransitions": 0}
            try:
                self.store.create_lease(cfg.namespace, {
                    "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                    "spec": new_spec})
            except ConflictError:
                return False
            self.observed_holder = cfg.identity
            return True
        spec: dict[str, Any] = dict(lease.get("spec") or {})
        self._observe(spec)
        holder = spec.get("holderIdentity")
        self.observed_holder = str(holder) if holder else None
        if holder != cfg.identity and not lease_expired(spec, now):
            return False
        taking_over = holder != cfg.identity
        previous = self._takeover(spec)
        if taking_over:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = _fmt(now)
        spec.update(holderIdentity=cfg.identity, renewTime=_fmt(now),
                    leaseDurationSeconds=int(cfg.lease_duration))
        try:
            self.store.replace_lease(cfg.namespace, {"metadata": lease["metadata"], "spec": spec})
        except ConflictError:
            return False
        if previous is not None:
            self.takeover_not_before = previous
        self.observed_holder = cfg.identity
        return True

    def run(self, stop: threading.Event, on_started: Callable[[], None],
            on_stopped: Callable[[], None]) -> None:
        """Campaign until ``stop``; call ``on_started`` on winning and ``on_stopped`` on
        losing the Lease (the caller must stop acting as leader at once)."""
        cfg = self.config
        while not stop.is_set():
            try:
                won = self.try_acquire_or_renew()
            except ClusterError as exc:
                _log.warning("lease update failed", error=str(exc))
                won = False
            if won:
                if not self.is_leader.is_set():
                    _log.info("became leader", lease=cfg.name, identity=cfg.identity,
                              wait_seconds=round(self.takeover_wait(), 3))
                    self.is_leader.set()
                    on_started()
            elif self.is_leader.is_set() and not self.fence.held():
                # The same rule the writes obey: by then they are refused already.
                _log.warning("lost leadership", lease=cfg.name, holder=self.observed_holder)
                self.fence.lose()
                self.is_leader.clear()
                on_stopped()
            stop.wait(cfg.retry_period)
        if self.is_leader.is_set():
            self.is_leader.clear()
            on_stopped()
            self.fence.lose()
            self._release()

    def _release(self) -> None:
        """Give the Lease up on a clean shutdown so a follower takes over at once."""
        cfg = self.config
        try:
            lease = self.store.get_lease(cfg.namespace, cfg.name)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != cfg.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1)
            self.store.replace_lease(cfg.namespace, {"metadata": lease["metadata"], "spec": spec})
        except ClusterError as exc:
            _log.warning("lease release failed", error=str(exc))
