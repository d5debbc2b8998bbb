"""The adapter's writes (issue 36): each is checked against the replica's fence just before
it is sent, and a write answered with a server error is in doubt, not failed."""

from __future__ import annotations

import pytest

from tests.unit.test_resources import Response, kube
from vgpu.cluster.fence import Fence, FencedError
from vgpu.errors import ClusterError, ConflictError, OutcomeUnknownError

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
