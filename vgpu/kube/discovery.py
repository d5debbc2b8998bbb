"""What the API server is, found once per process: its version (``GET /version``), and
what follows from it for the calls a preemption makes.

* The Eviction API version: ``policy/v1`` from Kubernetes 1.22, ``policy/v1beta1`` before.
  Before the version is known, the first eviction tries ``policy/v1`` and a server that
  does not know it says so (HTTP 400 naming the version); the answer is kept, so a
  process pays for that at most once, never per victim.
* Whether the server has the PodDisruptionConditions feature (beta and on by default
  from 1.26, GA in 1.31): there an eviction writes the ``DisruptionTarget`` condition
  (reason ``EvictionByEvictionAPI``) before it deletes the pod, and kube-scheduler marks
  its victims with one (reason ``PreemptionByScheduler``). A server whose version does not
  read counts as not having it: the cheaper and older rules then apply, which are safe on
  any server (docs/scheduler.md#preemption).

``GET /version`` is open to every authenticated client (``system:public-info-viewer``),
so it needs no RBAC of its own. A failed lookup is tried again after ``retry_seconds``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vgpu.errors import ClusterError, ConflictError, EvictionRefusedError, NotFoundError

EVICTION_V1 = "policy/v1"
EVICTION_V1BETA1 = "policy/v1beta1"
#: The first minor release of Kubernetes 1 that serves each.
_EVICTION_V1_SINCE = 22
_DISRUPTION_CONDITIONS_SINCE = 26


@dataclass(frozen=True, slots=True, order=True)
class ServerVersion:
    major: int
    minor: int

    def at_least(self, minor: int) -> bool:
        return self.major > 1 or (self.major == 1 and self.minor >= minor)


def _number(raw: Any) -> int | None:
    # Distributions decorate the minor version ("27+" on EKS and GKE).
    match = re.match(r"\d+", raw) if isinstance(raw, str) else None
    return int(match.group()) if match else None


def parse_version(body: Any) -> ServerVersion | None:
    """The version ``GET /version`` answered, or None when it does not read."""
    if not isinstance(body, dict):
        return None
    major, minor = _number(body.get("major")), _number(body.get("minor"))
    if major is None or minor is None:
        return None
    return ServerVersion(major, minor)


class Discovery:
    """The server's version, read once (``fetch`` is ``GET /version``), and the Eviction
    API version, known from it or learnt from the first eviction."""

    def __init__(self, fetch: Callable[[], Any], *, retry_seconds: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._retry = retry_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._fetching = threading.Lock()
        self._version: ServerVersion | None = None
        self._tried_at: float | None = None
        self._eviction: str | None = None
        # Held by the first eviction of a process while the version it speaks is unknown,
        # so that evictions started together do not each try the wrong one.
        self._probe = threading.Lock()

    def version(self) -> ServerVersion | None:
        with self._lock:
            if self._version is not None:
                return self._version
        # One look-up at a time: callers that come meanwhile wait for its answer.
        with self._fetching:
            with self._lock:
                if self._version is not None:
                    return self._version
                now = self._clock()
                if self._tried_at is not None and now - self._tried_at < self._retry:
                    return None
                self._tried_at = now
            try:
                found = parse_version(self._fetch())
            except ClusterError:
                found = None
            with self._lock:
                self._version = found
                return found

    def disruption_conditions(self) -> bool:
        version = self.version()
        return version is not None and version.at_least(_DISRUPTION_CONDITIONS_SINCE)

    def eviction_api(self) -> str | None:
        """The Eviction API version to use, or None until it is known (no version looked
        up and no eviction answered yet)."""
        with self._lock:
            if self._eviction is not None:
                return self._eviction
            if self._version is not None:
                return (EVICTION_V1 if self._version.at_least(_EVICTION_V1_SINCE)
                        else EVICTION_V1BETA1)
            return None

    def _learnt(self, api: str) -> None:
        with self._lock:
            self._eviction = api

    def evict(self, post: Callable[[str], object]) -> None:
        """Send an eviction with ``post(api_version)``, at the version the server serves."""
        known = self.eviction_api()
        if known is not None:
            post(known)
            return
        with self._probe:
            known = self.eviction_api()
            if known is not None:
                post(known)
                return
            try:
                post(EVICTION_V1)
            except ClusterError as exc:
                if isinstance(exc, (NotFoundError, EvictionRefusedError, ConflictError)):
                    self._learnt(EVICTION_V1)  # answered by a server that read it
                # Before Kubernetes 1.22 the server knows only policy/v1beta1 Evictions,
                # and says so naming the version it does not know (HTTP 400).
                if type(exc) is not ClusterError or EVICTION_V1 not in str(exc):
                    raise
                self._learnt(EVICTION_V1BETA1)
                post(EVICTION_V1BETA1)
                return
            self._learnt(EVICTION_V1)
