"""Who may read /metrics (vgpu/metrics_auth.py): delegated to the API server, as
kube-scheduler's secure port, with its answers remembered for a while."""

from __future__ import annotations

import pytest

from vgpu.errors import ClusterError
from vgpu.metrics_auth import ANONYMOUS, DelegatedGuard, Refuse, User, bearer


class Reviewer:
    """The API server's answers: tokens to users, users allowed on paths."""

    def __init__(self) -> None:
        self.tokens = {"prom": User("system:serviceaccount:monitoring:prometheus", "u1",
                                    ("system:serviceaccounts",)),
                       "tenant": User("alice")}
        self.allowed = {("system:serviceaccount:monitoring:prometheus", "/metrics")}
        self.down = False
        self.token_reviews = 0
        self.access_reviews = 0

    def review_token(self, token: str) -> User | None:
        self.token_reviews += 1
        if self.down:
            raise ClusterError("connection refused")
        return self.tokens.get(token)

    def review_access(self, user: User, path: str, verb: str) -> bool:
        self.access_reviews += 1
        if self.down:
            raise ClusterError("connection refused")
        assert verb == "get"
        return (user.name, path) in self.allowed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("header", "status"), [
    ("Bearer prom", 200),
    ("bearer prom", 200),  # the scheme is case-insensitive
    ("Bearer tenant", 403),  # authenticated, not authorized
    ("Bearer stolen-or-expired", 401),
    ("Basic cHJvbTo=", 401),
    ("Bearer ", 401),
    (None, 403),  # anonymous: the cluster's RBAC grants it nothing
])
def test_who_reads_metrics(header: str | None, status: int) -> None:
    decision = DelegatedGuard(Reviewer()).decide(header, "/metrics")
    assert decision.status == status, decision.reason


def test_a_refusal_names_the_user_and_the_path_as_kube_does() -> None:
    reason = DelegatedGuard(Reviewer()).decide(None, "/metrics").reason
    assert reason == f'forbidden: User "{ANONYMOUS}" cannot get path "/metrics"'


def test_answers_are_remembered_for_the_ttl_then_asked_again() -> None:
    reviewer, clock = Reviewer(), Clock()
    guard = DelegatedGuard(reviewer, ttl=10, clock=clock)
    for _ in range(5):
        assert guard.decide("Bearer prom", "/metrics").allowed
        assert guard.decide("Bearer nobody", "/metrics").status == 401
    assert (reviewer.token_reviews, reviewer.access_reviews) == (2, 1)
    # A revoked right takes effect once the answer is stale.
    reviewer.allowed.clear()
    clock.now = 9.9
    assert guard.decide("Bearer prom", "/metrics").allowed
    clock.now = 10.0
    assert guard.decide("Bearer prom", "/metrics").status == 403
    assert (reviewer.token_reviews, reviewer.access_reviews) == (3, 2)


def test_an_api_server_that_cannot_answer_is_503_and_nothing_is_remembered() -> None:
    reviewer = Reviewer()
    guard = DelegatedGuard(reviewer)
    reviewer.down = True
    decision = guard.decide("Bearer prom", "/metrics")
    assert decision.status == 503 and "connection refused" in decision.reason
    reviewer.down = False
    assert guard.decide("Bearer prom", "/metrics").allowed


def test_no_api_server_reads_for_nobody() -> None:
    assert Refuse("no API server").decide("Bearer prom", "/metrics").status == 403


@pytest.mark.parametrize(("header", "token"), [
    (None, None), ("Bearer abc", "abc"), ("  Bearer   abc  ", "abc"), ("Token abc", ""),
    ("Bearer", ""), ("Bearer " + "x" * 20000, ""),
])
def test_bearer(header: str | None, token: str | None) -> None:
    assert bearer(header) == token
