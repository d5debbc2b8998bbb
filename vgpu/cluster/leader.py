"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection.

The leader renews the Lease every ``retry_period``; a candidate takes it over once
``renewTime + leaseDurationSeconds`` has passed without a renewal. Every write is
conditional on the Lease's resourceVersion, so two candidates can never both win. A
leader that fails to renew within ``renew_deadline`` steps down before anyone else can
take over (renew_deadline < lease_duration), so there is never a moment with two leaders
acting.

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


def lease_expired(spec: dict[str, Any], now: dt.datetime) -> bool:
    """Whether a Lease's holder has let it lapse (pure, for tests)."""
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds") or 0
    if not spec.get("holderIdentity") or renewed is None:
        return True
    return now > renewed + dt.timedelta(seconds=float(duration))


class LeaderElector:
    def __init__(self, store: LeaseStore, config: ElectionConfig,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        self.store = store
        self.config = config
        self._clock = clock
        self.is_leader = threading.Event()
        self.observed_holder: str | None = None

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
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
        holder = spec.get("holderIdentity")
        self.observed_holder = str(holder) if holder else None
        if holder != cfg.identity and not lease_expired(spec, now):
            return False
        if holder != cfg.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec["acquireTime"] = _fmt(now)
        spec.update(holderIdentity=cfg.identity, renewTime=_fmt(now),
                    leaseDurationSeconds=int(cfg.lease_duration))
        try:
            self.store.replace_lease(cfg.namespace, {"metadata": lease["metadata"], "spec": spec})
        except ConflictError:
            return False
        self.observed_holder = cfg.identity
        return True

    def run(self, stop: threading.Event, on_started: Callable[[], None],
            on_stopped: Callable[[], None]) -> None:
        """Campaign until ``stop``; call ``on_started`` on winning and ``on_stopped`` on
        losing the Lease (the caller must stop acting as leader at once)."""
        cfg = self.config
        last_renew = 0.0
        while not stop.is_set():
            try:
                won = self.try_acquire_or_renew()
            except ClusterError as exc:
                _log.warning("lease update failed", error=str(exc))
                won = False
            now = time.monotonic()
            if won:
                last_renew = now
                if not self.is_leader.is_set():
                    _log.info("became leader", lease=cfg.name, identity=cfg.identity)
                    self.is_leader.set()
                    on_started()
            elif self.is_leader.is_set() and now - last_renew > cfg.renew_deadline:
                _log.warning("lost leadership", lease=cfg.name, holder=self.observed_holder)
                self.is_leader.clear()
                on_stopped()
            stop.wait(cfg.retry_period)
        if self.is_leader.is_set():
            self.is_leader.clear()
            on_stopped()
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
