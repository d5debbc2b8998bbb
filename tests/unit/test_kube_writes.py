"""The adapter's writes (issue 36): each is checked against the replica's fence just before
it is sent, and a write answered with a server error is in doubt, not failed; with a write
timeout, each carries its deadline to the transport and the API server (issue 46)."""

from __future__ import annotations

import time

import pytest

from tests.unit.test_resources import Response, kube
from vgpu.cluster.fence import Fence, FencedError
from vgpu.errors import ClusterError, ConflictError, OutcomeUnknownError
from vgpu.kube.deadlines import server_timeout

BIND = ("POST", "/api/v1/namespaces/ns/pods/p/binding")


def test_a_fenced_replica_sends_no_write_but_still_reads() -> None:
    cluster, recorder = kube()
    now = [100.0]
    cluster.fence = Fence(3.0, clock=lambda: now[0])
    cluster.fence.renewed(99.0)
    cluster.bind("ns", "p", "node-1", {})
    assert [r[:2] for r in recorder.requests] == [BIND]
    now[0] = 200.0  # woke from a pause
    for write in (lambda: cluster.bind("ns", "p", "node-1", {}),
                  lambda: cluster.evict("ns", "p", uid="u"),
                  lambda: cluster.patch_annotations("pods", "p", {"a": "b"}, "ns"),
                  lambda: cluster.delete("pods", "p", "ns")):
        with pytest.raises(FencedError):
            write()
    cluster.get("pods", "p", "ns")
    assert [r[:2] for r in recorder.requests] == [BIND, ("GET", "/api/v1/namespaces/ns/pods/p")]


@pytest.mark.parametrize(("method", "status", "error"), [
    ("bind", 500, OutcomeUnknownError),
    ("bind", 503, OutcomeUnknownError),
    ("bind", 504, OutcomeUnknownError),
    ("bind", 409, ConflictError),
    ("get", 500, ClusterError),  # a read changes nothing: a plain failure
])
def test_a_server_error_on_a_write_is_in_doubt(method: str, status: int,
                                               error: type[Exception]) -> None:
    cluster, _ = kube(Response(status, b'{"message": "etcdserver: request timed out"}'))
    with pytest.raises(error) as caught:
        if method == "bind":
            cluster.bind("ns", "p", "node-1", {})
        else:
            cluster.get("pods", "p", "ns")
    assert type(caught.value) is error


@pytest.mark.parametrize(("seconds", "query"), [
    (5.0, "5000ms"),
    (0.0015, "1ms"),
    (0.0009, "1ms"),   # never 0: to a current API server that means no timeout at all
    (-3.0, "1ms"),     # a deadline already passed is refused before sending (test_http1)
    (4.9999, "4999ms"),  # rounded down: the server gives up no later than the client
])
def test_the_server_timeout_is_whole_milliseconds_never_zero(seconds: float, query: str) -> None:
    assert server_timeout(seconds) == query


def test_every_write_carries_its_deadline_and_reads_none() -> None:
    cluster, recorder = kube()
    cluster.write_timeout = 5.0
    before = time.monotonic()
    cluster.bind("ns", "p", "node-1", {})
    cluster.patch_annotations("pods", "p", {"a": "b"}, "ns")
    cluster.evict("ns", "p", uid="u")
    cluster.delete("pods", "p", "ns")
    cluster.get("pods", "p", "ns")
    cluster.list("pods")
    after = time.monotonic()
    *writes, get, lst = zip(recorder.requests, recorder.deadlines, strict=True)
    for (method, path, query, _), deadline in writes:
        assert method in ("POST", "PATCH", "DELETE"), path
        assert deadline is not None and before + 5.0 <= deadline <= after + 5.0, path
        (timeout,) = [v for k, v in query if k == "timeout"]
        assert timeout.endswith("ms") and 4000 < int(timeout[:-2]) <= 5000, (path, timeout)
    for (method, path, query, _), deadline in (get, lst):
        assert method == "GET" and deadline is None, path
        assert "timeout" not in dict(query), path


def test_without_a_write_timeout_no_deadline_is_set() -> None:
    cluster, recorder = kube()
    cluster.bind("ns", "p", "node-1", {})
    assert recorder.deadlines == [None]
    assert "timeout" not in dict(recorder.requests[0][2])
