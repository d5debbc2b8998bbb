"""Who may read a component's ``/metrics``: authentication and authorization delegated to
the API server, as kube-scheduler does.

A request's bearer token is reviewed (TokenReview) and the user it names is asked about
(SubjectAccessReview: ``get`` on the non-resource path, ``/metrics``): a Prometheus whose
account is bound to a ClusterRole with ``nonResourceURLs: [/metrics]`` reads, nobody else
does. A request without a token is ``system:anonymous`` (as kube-scheduler's delegated
authentication: the cluster's RBAC decides, and grants it nothing by default); a token the
API server does not accept is 401. Answers are remembered for ``ttl`` seconds, allowed and
refused alike (kube's delegated authenticator and authorizer cache for 10 s), so a scrape
costs no API call after the first. The health paths stay open: they are never asked about.

The reviews themselves are Kubernetes I/O, behind :class:`Reviewer`
(:class:`vgpu.kube.reviews.KubeReviewer` on a real API server).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from vgpu.errors import ClusterError

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
#: Answers remembered at most (a scrape per target every few seconds needs a handful).
REMEMBERED = 4096


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)


ANONYMOUS_USER = User(ANONYMOUS, groups=(UNAUTHENTICATED,))


class Reviewer(Protocol):
    def review_token(self, token: str) -> User | None:
        """The user the token authenticates as; None when the API server refuses it.
        Raises ``ClusterError`` when it cannot tell."""
        ...

    def review_access(self, user: User, path: str, verb: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource ``path``. Raises
        ``ClusterError`` when it cannot tell."""
        ...


@dataclass(frozen=True)
class Decision:
    """An HTTP status for the request (200: serve it) and why not."""

    status: int
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


ALLOWED = Decision(200)


class Guard(Protocol):
    def decide(self, authorization: str | None, path: str) -> Decision: ...


T = TypeVar("T")


class _Remembered(Generic[T]):
    """A bounded map whose entries go stale after ``ttl`` seconds."""

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self._ttl, self._clock = ttl, clock
        self._items: OrderedDict[object, tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: object) -> tuple[bool, T | None]:
        with self._lock:
            hit = self._items.get(key)
            if hit is None or self._clock() - hit[0] >= self._ttl:
                return False, None
            return True, hit[1]

    def put(self, key: object, value: T) -> None:
        with self._lock:
            self._items[key] = (self._clock(), value)
            self._items.move_to_end(key)
            while len(self._items) > REMEMBERED:
                self._items.popitem(last=False)


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; "" for another scheme or a
    malformed one (refused), None for no header (anonymous)."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 16384:
        return ""
    return token


class DelegatedGuard:
    def __init__(self, reviewer: Reviewer, *, ttl: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._reviewer = reviewer
        self._users: _Remembered[User | None] = _Remembered(ttl, clock)
        self._access: _Remembered[bool] = _Remembered(ttl, clock)

    def decide(self, authorization: str | None, path: str) -> Decision:
        token = bearer(authorization)
        if token == "":
            return Decision(401, "Unauthorized: send Authorization: Bearer <token>")
        try:
            user = ANONYMOUS_USER if token is None else self._authenticate(token)
            if user is None:
                return Decision(401, "Unauthorized")
            if not self._authorize(user, path):
                return Decision(403, f'forbidden: User "{user.name}" cannot get path '
                                     f'"{path}"')
        except ClusterError as exc:
            return Decision(503, f"cannot ask the API server who this is: {exc}")
        return ALLOWED

    def _authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        known, user = self._users.get(key)
        if not known:
            user = self._reviewer.review_token(token)
            self._users.put(key, user)
        return user

    def _authorize(self, user: User, path: str) -> bool:
        key = (user.name, user.uid, user.groups, tuple(sorted(
            (k, tuple(v)) for k, v in user.extra.items())), path)
        known, allowed = self._access.get(key)
        if not known or allowed is None:
            allowed = self._reviewer.review_access(user, path, "get")
            self._access.put(key, allowed)
        return allowed


@dataclass(frozen=True)
class Refuse:
    """The guard of a component with no API server to ask: nobody reads ``/metrics``."""

    reason: str

    def decide(self, authorization: str | None, path: str) -> Decision:
        return Decision(403, self.reason)
