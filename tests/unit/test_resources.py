"""The port's resource table, and the REST paths the real adapter builds from it.

The adapter runs here over a recording transport, so every row's paths and the
``apiVersion``/``kind`` of what it writes are pinned without an API server; the e2e
tests check the same requests against a real one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, get_args

import pytest

from vgpu.cluster.port import Kind, Selector
from vgpu.cluster.resources import RESOURCES, resource
from vgpu.errors import ConflictError, InvalidError, NotFoundError
from vgpu.kube.adapter import KubeCluster


def test_every_kind_has_one_row_and_every_row_a_kind() -> None:
    assert sorted(get_args(Kind)) == sorted(RESOURCES)
    for plural, row in RESOURCES.items():
        assert row.plural == plural


@pytest.mark.parametrize(("kind", "group", "singular"), [
    ("pods", "", "pod"),
    ("leases", "coordination.k8s.io", "lease"),
    ("storageclasses", "storage.k8s.io", "storageclass"),
    ("poddisruptionbudgets", "policy", "poddisruptionbudget"),
])
def test_group_and_singular(kind: str, group: str, singular: str) -> None:
    assert (resource(kind).group, resource(kind).singular) == (group, singular)


def test_an_unknown_resource_is_a_clear_error() -> None:
    with pytest.raises(InvalidError, match="'widgets' is not a resource"):
        resource("widgets")


@dataclass
class Response:
    status: int
    data: bytes
    body_lines: list[bytes] = field(default_factory=list)

    def lines(self) -> Iterator[bytes]:
        return iter(self.body_lines)

    def read(self) -> bytes:
        return self.data

    def close(self) -> None:
        pass


class Recorder:
    """A transport that answers every request with ``answer`` and remembers it."""

    def __init__(self, answer: Response | None = None) -> None:
        self.requests: list[tuple[str, str, list[tuple[str, str]], Any]] = []
        #: Each call's deadline (``time.monotonic``, None: none), in the order sent.
        self.deadlines: list[float | None] = []
        self.answer = answer or Response(200, b'{"metadata": {"resourceVersion": "7"}}')

    def call(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
             content_type: str, timeout: Any,
             deadline: float | None = None) -> tuple[int, bytes]:
        self.requests.append((method, path, query, body))
        self.deadlines.append(deadline)
        return self.answer.status, self.answer.data

    def stream(self, method: str, path: str, *, query: list[tuple[str, str]],
               timeout: Any) -> Response:
        self.requests.append((method, path, query, None))
        return self.answer


def kube(answer: Response | None = None) -> tuple[KubeCluster, Recorder]:
    recorder = Recorder(answer)
    return KubeCluster(recorder, qps=0), recorder


# (kind, the collection in namespace "ns" or cluster-wide, the object "x" in it)
PATHS = [
    ("pods", "/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/pods/x"),
    ("nodes", "/api/v1/nodes", "/api/v1/nodes/x"),
    ("secrets", "/api/v1/namespaces/ns/secrets", "/api/v1/namespaces/ns/secrets/x"),
    ("persistentvolumes", "/api/v1/persistentvolumes", "/api/v1/persistentvolumes/x"),
    ("persistentvolumeclaims", "/api/v1/namespaces/ns/persistentvolumeclaims",
     "/api/v1/namespaces/ns/persistentvolumeclaims/x"),
    ("leases", "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
     "/apis/coordination.k8s.io/v1/namespaces/ns/leases/x"),
    ("mutatingwebhookconfigurations",
     "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
     "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/x"),
    ("validatingwebhookconfigurations",
     "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
     "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/x"),
    ("storageclasses", "/apis/storage.k8s.io/v1/storageclasses",
     "/apis/storage.k8s.io/v1/storageclasses/x"),
    ("csinodes", "/apis/storage.k8s.io/v1/csinodes", "/apis/storage.k8s.io/v1/csinodes/x"),
    ("poddisruptionbudgets", "/apis/policy/v1/namespaces/ns/poddisruptionbudgets",
     "/apis/policy/v1/namespaces/ns/poddisruptionbudgets/x"),
    ("events", "/api/v1/namespaces/ns/events", "/api/v1/namespaces/ns/events/x"),
    ("namespaces", "/api/v1/namespaces", "/api/v1/namespaces/x"),
    ("services", "/api/v1/namespaces/ns/services", "/api/v1/namespaces/ns/services/x"),
    ("replicationcontrollers", "/api/v1/namespaces/ns/replicationcontrollers",
     "/api/v1/namespaces/ns/replicationcontrollers/x"),
    ("replicasets", "/apis/apps/v1/namespaces/ns/replicasets",
     "/apis/apps/v1/namespaces/ns/replicasets/x"),
    ("statefulsets", "/apis/apps/v1/namespaces/ns/statefulsets",
     "/apis/apps/v1/namespaces/ns/statefulsets/x"),
    ("resourcequotas", "/api/v1/namespaces/ns/resourcequotas",
     "/api/v1/namespaces/ns/resourcequotas/x"),
    ("configmaps", "/api/v1/namespaces/ns/configmaps", "/api/v1/namespaces/ns/configmaps/x"),
]


def test_the_table_of_paths_covers_every_resource() -> None:
    assert sorted(kind for kind, _, _ in PATHS) == sorted(RESOURCES)


@pytest.mark.parametrize(("kind", "collection", "one"), PATHS)
def test_paths_of_every_resource(kind: Kind, collection: str, one: str) -> None:
    cluster, recorder = kube()
    row = RESOURCES[kind]
    namespace = "ns" if row.namespaced else None
    cluster.list(kind, Selector(namespace=namespace))
    cluster.get(kind, "x", namespace)
    cluster.create(kind, {"metadata": {"name": "x", "namespace": namespace}})
    cluster.replace(kind, {"metadata": {"name": "x", "namespace": namespace,
                                        "resourceVersion": "3"}})
    cluster.patch_annotations(kind, "x", {"a": "1"}, namespace)
    cluster.delete(kind, "x", namespace)
    assert [(m, p) for m, p, _, _ in recorder.requests] == [
        ("GET", collection), ("GET", one), ("POST", collection), ("PUT", one),
        ("PATCH", one), ("DELETE", one)]
    for _, _, _, body in recorder.requests[2:4]:
        assert (body["apiVersion"], body["kind"]) == (row.api_version, row.kind)
    assert recorder.requests[3][3]["metadata"]["resourceVersion"] == "3"


def test_a_watch_streams_from_the_resources_path() -> None:
    line = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "x"}}}).encode()
    cluster, recorder = kube(Response(200, b"", [line, b"\n"]))
    events = list(cluster.watch("storageclasses", "5", timeout_seconds=1))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "x")]
    method, path, query, _ = recorder.requests[0]
    assert (method, path) == ("GET", "/apis/storage.k8s.io/v1/storageclasses")
    assert ("watch", "true") in query and ("resourceVersion", "5") in query


def test_namespaced_defaults_and_all_namespaces() -> None:
    cluster, recorder = kube()
    cluster.list("leases")
    cluster.get("secrets", "x")
    cluster.create("pods", {"metadata": {"name": "x"}})
    cluster.get("nodes", "x", "ignored")
    cluster.list("pods", Selector(node_name="n1"))
    assert [p for _, p, _, _ in recorder.requests] == [
        "/apis/coordination.k8s.io/v1/leases", "/api/v1/namespaces/default/secrets/x",
        "/api/v1/namespaces/default/pods", "/api/v1/nodes/x", "/api/v1/pods"]
    assert ("fieldSelector", "spec.nodeName=n1") in recorder.requests[-1][2]


def test_events_of_one_object() -> None:
    cluster, recorder = kube()
    cluster.list("events", Selector(namespace="ns", involved_name="p"))
    assert recorder.requests[0][1] == "/api/v1/namespaces/ns/events"
    assert ("fieldSelector", "involvedObject.name=p") in recorder.requests[0][2]


def test_a_body_keeps_its_own_api_version() -> None:
    cluster, recorder = kube()
    cluster.create("poddisruptionbudgets", {"apiVersion": "policy/v1beta1",
                                            "metadata": {"name": "x"}})
    assert recorder.requests[0][3]["apiVersion"] == "policy/v1beta1"
    assert recorder.requests[0][3]["kind"] == "PodDisruptionBudget"


@pytest.mark.parametrize(("kind", "selector", "message"), [
    ("nodes", Selector(namespace="ns"), "cluster-scoped"),
    ("storageclasses", Selector(namespace="ns"), "cluster-scoped"),
    ("secrets", Selector(node_name="n1"), "pods only"),
    ("pods", Selector(involved_name="p"), "events only"),
])
def test_a_selector_that_cannot_apply_is_refused_before_sending(
        kind: Kind, selector: Selector, message: str) -> None:
    cluster, recorder = kube()
    with pytest.raises(InvalidError, match=message):
        cluster.list(kind, selector)
    with pytest.raises(InvalidError, match=message):
        cluster.watch(kind, "1", selector)
    assert recorder.requests == []


def test_replace_needs_a_name() -> None:
    cluster, recorder = kube()
    with pytest.raises(InvalidError, match=r"no metadata\.name"):
        cluster.replace("secrets", {"metadata": {"namespace": "ns"}})
    assert recorder.requests == []


@pytest.mark.parametrize(("status", "error"), [(404, NotFoundError), (409, ConflictError),
                                               (422, InvalidError)])
def test_errors_name_the_resource(status: int, error: type[Exception]) -> None:
    body = json.dumps({"message": "nope"}).encode()
    cluster, _ = kube(Response(status, body))
    with pytest.raises(error, match=r"replace mutatingwebhookconfiguration x: nope"):
        cluster.replace("mutatingwebhookconfigurations", {"metadata": {"name": "x"}})
