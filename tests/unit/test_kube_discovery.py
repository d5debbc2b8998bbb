"""What the adapter finds out about the API server once per process (issue 44): the
Eviction API version (never tried again per victim) and whether the server writes
DisruptionTarget conditions (its version, from ``GET /version``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_resources import Response
from vgpu.errors import ClusterError, EvictionRefusedError
from vgpu.kube.adapter import KubeCluster
from vgpu.kube.discovery import Discovery, ServerVersion, parse_version

EVICTION = "/api/v1/namespaces/ns/pods/{}/eviction"
V1_UNKNOWN = Response(400, b'{"message": "no kind \\"Eviction\\" is registered for version '
                           b'\\"policy/v1\\" in scheme \\"k8s.io/kubernetes/pkg/api/legacyscheme'
                           b'/scheme.go:30\\""}')


class Server:
    """A transport that answers as an API server of ``minor`` would (1.x)."""

    def __init__(self, minor: int | None, refuse: frozenset[str] = frozenset()) -> None:
        self.minor = minor
        self.refuse = refuse
        self.requests: list[tuple[str, str, str]] = []

    def call(self, method: str, path: str, *, query: Any, body: Any, content_type: str,
             timeout: Any, deadline: float | None = None) -> tuple[int, bytes]:
        api = (body or {}).get("apiVersion", "")
        self.requests.append((method, path, api))
        if path == "/version":
            if self.minor is None:
                return 503, b'{"message": "unavailable"}'
            return 200, b'{"major": "1", "minor": "%d+", "gitVersion": "v1.%d.2"}' % (
                self.minor, self.minor)
        if path.endswith("/eviction"):
            name = path.split("/")[-2]
            if api == "policy/v1" and self.minor is not None and self.minor < 22:
                return V1_UNKNOWN.status, V1_UNKNOWN.data
            if name in self.refuse:
                return 429, b'{"message": "Cannot evict pod as it would violate the budget"}'
        return 200, b"{}"


def evictions(server: Server) -> list[tuple[str, str]]:
    return [(path.split("/")[-2], api) for method, path, api in server.requests
            if path.endswith("/eviction")]


@pytest.mark.parametrize(("minor", "api"), [(20, "policy/v1beta1"), (21, "policy/v1beta1"),
                                            (22, "policy/v1"), (31, "policy/v1")])
def test_the_eviction_version_follows_the_server_version_once_known(minor: int,
                                                                    api: str) -> None:
    server = Server(minor)
    kube = KubeCluster(server, qps=0)
    kube.pod_disruption_conditions()
    for name in ("a", "b", "c"):
        kube.evict("ns", name, uid="u")
    assert evictions(server) == [("a", api), ("b", api), ("c", api)]
    assert [r[1] for r in server.requests].count("/version") == 1


def test_a_1_20_server_costs_one_refused_eviction_per_process_not_per_victim() -> None:
    # The version was never looked up: the first eviction finds out.
    server = Server(20, refuse=frozenset({"c"}))
    kube = KubeCluster(server, qps=0)
    kube.evict("ns", "a")
    kube.evict("ns", "b")
    with pytest.raises(EvictionRefusedError):
        kube.evict("ns", "c")
    assert evictions(server) == [("a", "policy/v1"), ("a", "policy/v1beta1"),
                                 ("b", "policy/v1beta1"), ("c", "policy/v1beta1")]


def test_a_current_server_answers_the_first_eviction_at_v1_for_good() -> None:
    server = Server(30, refuse=frozenset({"a"}))
    kube = KubeCluster(server, qps=0)
    with pytest.raises(EvictionRefusedError):
        kube.evict("ns", "a")  # refused by a budget: the server read policy/v1
    kube.evict("ns", "b")
    assert evictions(server) == [("a", "policy/v1"), ("b", "policy/v1")]


@pytest.mark.parametrize(("minor", "conditions"), [(20, False), (25, False), (26, True),
                                                   (33, True)])
def test_disruption_conditions_from_1_26(minor: int, conditions: bool) -> None:
    server = Server(minor)
    kube = KubeCluster(server, qps=0)
    assert kube.pod_disruption_conditions() is conditions
    assert kube.pod_disruption_conditions() is conditions
    assert [r[1] for r in server.requests] == ["/version"]


def test_a_version_that_cannot_be_read_is_tried_again_later() -> None:
    now = [0.0]
    answers: list[Any] = [ClusterError("get the server version: unavailable (HTTP 503)"),
                          {"major": "1", "minor": "28"}]

    def fetch() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    found = Discovery(fetch, retry_seconds=30.0, clock=lambda: now[0])
    assert not found.disruption_conditions()  # unknown: the rules safe on any server
    now[0] = 10.0
    assert not found.disruption_conditions()  # not asked again yet
    assert len(answers) == 1
    now[0] = 31.0
    assert found.disruption_conditions()
    assert found.eviction_api() == "policy/v1"


@pytest.mark.parametrize(("body", "version"), [
    ({"major": "1", "minor": "20", "gitVersion": "v1.20.2"}, ServerVersion(1, 20)),
    ({"major": "1", "minor": "27+", "gitVersion": "v1.27.3-eks-a5565ad"}, ServerVersion(1, 27)),
    ({"major": "2", "minor": "0"}, ServerVersion(2, 0)),
    ({"major": "1"}, None),
    ({"major": "", "minor": "x"}, None),
    (["1", "20"], None),
    ({"major": 1, "minor": 20}, None),
])
def test_parse_version(body: Any, version: ServerVersion | None) -> None:
    assert parse_version(body) == version


def test_callers_during_the_look_up_wait_for_its_answer() -> None:
    import threading

    started, answer = threading.Event(), threading.Event()
    calls = []

    def fetch() -> Any:
        calls.append(1)
        started.set()
        answer.wait(10)
        return {"major": "1", "minor": "20"}

    found = Discovery(fetch)
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(found.eviction_api() or
                                                           found.version()))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.append(found.version()))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first look-up, not answering "unknown"
    answer.set()
    first.join(10)
    second.join(10)
    assert results == [ServerVersion(1, 20), ServerVersion(1, 20)] and len(calls) == 1
