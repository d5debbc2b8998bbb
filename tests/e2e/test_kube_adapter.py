"""The Kubernetes adapter of the cluster port, against a real kube-apiserver.

Every component's correctness rests on these semantics, so they are pinned here on the
real thing rather than on the in-memory cluster: conditional patches, binding with
annotations, watches that resume, errors mapped onto the vgpu error tree, events, and
leader election on a real Lease. The in-cluster transport is exercised with a real
service-account token, so the deployed path (which never imports ``kubernetes``) is
tested too.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from vgpu.cluster.informer import Informer
from vgpu.cluster.leader import ClusterLeaseStore, ElectionConfig, LeaderElector
from vgpu.cluster.port import Kind, Obj, Selector
from vgpu.cluster.resources import RESOURCES
from vgpu.errors import ClusterError, ConflictError, NotFoundError
from vgpu.kube import adapter


@pytest.fixture
def kube(control_plane: ControlPlane) -> adapter.KubeCluster:
    cluster = adapter.connect(str(control_plane.kubeconfig))
    assert cluster is not None
    return cluster


def pod(name: str, namespace: str) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "busybox"}]}}


def test_create_get_list_and_delete(kube: adapter.KubeCluster, namespace: str) -> None:
    created = kube.create("pods", pod("a", namespace))
    assert created["metadata"]["uid"]
    assert kube.get("pods", "a", namespace)["spec"]["containers"][0]["name"] == "main"
    listed = kube.list("pods", Selector(namespace=namespace))
    assert [p["metadata"]["name"] for p in listed.items] == ["a"]
    assert int(listed.resource_version) > 0
    with pytest.raises(ConflictError):
        kube.create("pods", pod("a", namespace))
    kube.delete("pods", "a", namespace)
    with pytest.raises(NotFoundError):
        kube.get("pods", "missing", namespace)


@pytest.fixture
def node_name(kube: adapter.KubeCluster) -> Iterator[str]:
    """A Node name for one test; the Node is deleted after it, since tests that count the
    cluster's nodes (the scheduler's "0/N nodes are available") share this API server."""
    name = f"node-{time.monotonic_ns()}"
    yield name
    with contextlib.suppress(NotFoundError):
        kube.delete("nodes", name)


def test_conditional_annotation_patch(kube: adapter.KubeCluster, node_name: str) -> None:
    name = node_name
    node = kube.create("nodes", {"metadata": {"name": name}})
    rv = node["metadata"]["resourceVersion"]
    kube.patch_annotations("nodes", name, {"vgpu.io/x": "1"}, resource_version=rv)
    with pytest.raises(ConflictError):
        kube.patch_annotations("nodes", name, {"vgpu.io/x": "2"}, resource_version=rv)
    after = kube.patch_annotations("nodes", name, {"vgpu.io/x": None, "vgpu.io/y": "3"})
    assert after["metadata"]["annotations"] == {"vgpu.io/y": "3"}


def test_bind_carries_annotations_and_happens_once(kube: adapter.KubeCluster,
                                                   namespace: str) -> None:
    kube.create("pods", pod("b", namespace))
    kube.bind(namespace, "b", "gpu-node-1", {"vgpu.io/bind-phase": "allocating"})
    bound = kube.get("pods", "b", namespace)
    assert bound["spec"]["nodeName"] == "gpu-node-1"
    assert bound["metadata"]["annotations"]["vgpu.io/bind-phase"] == "allocating"
    with pytest.raises(ConflictError):
        kube.bind(namespace, "b", "gpu-node-2", {})


def test_watch_resumes_and_field_selector(kube: adapter.KubeCluster, namespace: str) -> None:
    start = kube.list("pods", Selector(namespace=namespace)).resource_version
    kube.create("pods", pod("w", namespace))
    kube.bind(namespace, "w", "watched-node", {})
    events = list(kube.watch("pods", start, Selector(namespace=namespace), timeout_seconds=1))
    assert [e.type for e in events] == ["ADDED", "MODIFIED"]
    on_node = list(kube.watch("pods", start, Selector(node_name="watched-node"),
                              timeout_seconds=1))
    assert [e.object["metadata"]["name"] for e in on_node] == ["w"]


def test_informer_over_the_real_api(kube: adapter.KubeCluster, namespace: str) -> None:
    seen = threading.Event()
    informer = Informer(kube, "pods", lambda old, new: seen.set()
                        if new and new["metadata"]["name"] == "late" else None,
                        selector=Selector(namespace=namespace), watch_timeout=2)
    stop = threading.Event()
    thread = informer.start(stop)
    try:
        assert informer.synced.wait(10)
        kube.create("pods", pod("late", namespace))
        assert seen.wait(10)
    finally:
        stop.set()
        thread.join(10)


def test_record_event(kube: adapter.KubeCluster, namespace: str) -> None:
    created = kube.create("pods", pod("e", namespace))
    kube.record_event(created, "Warning", "FailedScheduling",
                      "0/1 nodes are available: 1 insufficient GPU memory.", "vgpu-scheduler")
    events = kube.request_json("GET", f"/api/v1/namespaces/{namespace}/events", "list events")
    reasons = [(e["reason"], e["involvedObject"]["name"]) for e in events["items"]]
    assert ("FailedScheduling", "e") in reasons


def test_leader_election_on_a_real_lease(kube: adapter.KubeCluster, namespace: str) -> None:
    store = ClusterLeaseStore(kube)
    a = LeaderElector(store, ElectionConfig(namespace, "sched", "a", lease_duration=2))
    b = LeaderElector(store, ElectionConfig(namespace, "sched", "b", lease_duration=2))
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    time.sleep(3)  # a stops renewing: its lease lapses
    assert b.try_acquire_or_renew()
    assert not a.try_acquire_or_renew()
    lease = store.get_lease(namespace, "sched")
    assert lease["spec"]["holderIdentity"] == "b"


def test_in_cluster_transport_with_a_service_account_token(
        control_plane: ControlPlane, kube: adapter.KubeCluster, namespace: str,
        tmp_path: Path) -> None:
    # A real bound token for the namespace's default account, allowed to read pods there.
    token: dict[str, Any] = kube.request_json(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token", "token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 600}})
    (tmp_path / "token").write_text(token["status"]["token"])
    (tmp_path / "ca.crt").write_bytes(control_plane.ca_cert.read_bytes())
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace
    kube.request_json("POST", f"{rbac}/roles", "role", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "read-pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get"]}]})
    kube.request_json("POST", f"{rbac}/rolebindings", "binding", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "read-pods"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]})
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    in_cluster = adapter.KubeCluster(adapter.InClusterTransport(host, port, str(tmp_path)))
    kube.create("pods", pod("seen", namespace))
    deadline = time.monotonic() + 10
    while True:  # RBAC caches take a moment to see the new binding
        try:
            names = [p["metadata"]["name"]
                     for p in in_cluster.list("pods", Selector(namespace=namespace)).items]
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert names == ["seen"]
    # Nothing beyond the role: listing nodes is forbidden, reported as a cluster error.
    with pytest.raises(ClusterError, match="403"):
        in_cluster.list("nodes")


def test_heartbeat_time_format_is_accepted_by_the_server(kube: adapter.KubeCluster,
                                                         node_name: str) -> None:
    from vgpu.codecs import encode_heartbeat

    name = node_name
    kube.create("nodes", {"metadata": {"name": name}})
    stamp = encode_heartbeat(dt.datetime.now(dt.UTC))
    got = kube.patch_annotations("nodes", name, {"vgpu.io/node-heartbeat": stamp})
    assert json.dumps(got["metadata"]["annotations"]["vgpu.io/node-heartbeat"]) == json.dumps(
        stamp)


# --- every resource of the port's table, beyond pods and nodes -----------------------------

_TEMPLATE: Obj = {"metadata": {"labels": {"app": "x"}},
                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}

MINIMAL: dict[str, Obj] = {
    "secrets": {"type": "Opaque", "data": {"k": "dg=="}},
    "leases": {"spec": {"holderIdentity": "a"}},
    "mutatingwebhookconfigurations": {"webhooks": []},
    "validatingwebhookconfigurations": {"webhooks": []},
    "persistentvolumes": {"spec": {"capacity": {"storage": "1Gi"},
                                   "accessModes": ["ReadWriteOnce"],
                                   "hostPath": {"path": "/tmp/vgpu-e2e"}}},
    "persistentvolumeclaims": {"spec": {"accessModes": ["ReadWriteOnce"],
                                        "resources": {"requests": {"storage": "1Gi"}}}},
    "storageclasses": {"provisioner": "example.com/vgpu-e2e"},
    "csinodes": {"spec": {"drivers": []}},
    "poddisruptionbudgets": {"spec": {"maxUnavailable": 1,
                                      "selector": {"matchLabels": {"app": "x"}}}},
    # involvedObject.namespace must be the Event's own: filled in by the test.
    "events": {"involvedObject": {"kind": "Pod", "name": "x"}, "reason": "E2E",
               "message": "m", "type": "Normal", "source": {"component": "vgpu-e2e"}},
    "namespaces": {},
    # Headless: no cluster IP to allocate.
    "services": {"spec": {"clusterIP": "None", "ports": [{"port": 80}],
                          "selector": {"app": "x"}}},
    "replicationcontrollers": {"spec": {"replicas": 0, "selector": {"app": "x"},
                                        "template": _TEMPLATE}},
    "replicasets": {"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}},
                             "template": _TEMPLATE}},
    "statefulsets": {"spec": {"replicas": 0, "serviceName": "x",
                              "selector": {"matchLabels": {"app": "x"}},
                              "template": _TEMPLATE}},
    "resourcequotas": {"spec": {"hard": {"requests.vgpu.io/memory-mib": "1000"}}},
    "configmaps": {"data": {"a": "b"}},
}


def test_the_table_and_this_test_agree() -> None:
    assert sorted(MINIMAL) == sorted(set(RESOURCES) - {"pods", "nodes"})


def _served(kube: adapter.KubeCluster, kind: Kind) -> str | None:
    """The version of the row this API server serves: its own, else the first of its
    fallbacks (policy/v1 came in 1.21), else None."""
    row = RESOURCES[kind]
    for version in (row.api_version, *row.fallbacks):
        path = f"/apis/{version}" if row.group else "/api/v1"
        try:
            found = kube.request_json("GET", path, f"discover {version}")
        except NotFoundError:
            continue
        if any(r.get("name") == kind for r in found.get("resources") or []):
            return version
    return None


@pytest.mark.parametrize("kind", sorted(MINIMAL))
def test_every_resource_round_trips_through_the_port(kube: adapter.KubeCluster, namespace: str,
                                                     kind: Kind) -> None:
    row = RESOURCES[kind]
    ns = namespace if row.namespaced else None
    selector = Selector(namespace=ns)
    version = _served(kube, kind)
    if version is None:
        # The adapter still builds the row's path; the server answers it is not there.
        with pytest.raises(NotFoundError):
            kube.list(kind, selector)
        return
    name = f"vgpu-e2e-{time.monotonic_ns()}"
    # The first list finds the version the server serves; every call after it uses it.
    start = kube.list(kind, selector).resource_version
    body = copy.deepcopy(MINIMAL[kind])
    if "involvedObject" in body:
        body["involvedObject"]["namespace"] = ns
    created = kube.create(kind, {**body, "metadata": {"name": name, "namespace": ns}})
    try:
        assert (created["apiVersion"], created["kind"]) == (version, row.kind)
        assert created["metadata"].get("namespace") == ns
        got = kube.get(kind, name, ns)
        assert got["metadata"]["uid"] == created["metadata"]["uid"]
        assert name in [o["metadata"]["name"] for o in kube.list(kind, selector).items]
        events = list(kube.watch(kind, start, selector, timeout_seconds=1))
        assert ("ADDED", name) in [(e.type, e.object["metadata"]["name"]) for e in events]
        patched = kube.patch_annotations(kind, name, {"vgpu.io/e2e": "1"}, ns)
        with pytest.raises(ConflictError):
            kube.replace(kind, got)  # the version read before the patch is stale
        replaced = kube.replace(kind, patched)
        assert replaced["metadata"]["annotations"] == {"vgpu.io/e2e": "1"}
    finally:
        kube.delete(kind, name, ns)
        # Without a controller-manager nothing removes a protection finalizer (PVs, PVCs).
        with contextlib.suppress(NotFoundError):
            left = kube.get(kind, name, ns)
            left["metadata"]["finalizers"] = []
            kube.replace(kind, left)
    if kind == "namespaces":
        # Only the namespace controller finalizes a deleted namespace: it stays, terminating.
        assert kube.get(kind, name, ns)["metadata"].get("deletionTimestamp")
        return
    with pytest.raises(NotFoundError):
        kube.get(kind, name, ns)
