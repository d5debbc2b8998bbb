"""What the install suite (``test_install``) does as someone other than the admin: scrape the
components as a Prometheus does, and write with a component's token as a thief would.

Tokens come from the TokenRequest API: a reader's (an account bound to the installed
ClusterRole ``vgpu-metrics-reader``), and a component's own, bound to one of its pods as the
kubelet's projected token is (so it carries the pod's name and uid, which ``/node-scope``
reads the agent's node from).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.controlplane.real_cluster import RealCluster
from tests.e2e.install_support import (
    AGENT_NAMESPACE,
    NAMESPACE,
    NODE,
    WORKLOADS,
    Samples,
    api,
    component_pods,
    sample_sum,
)
from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu.errors import ClusterError
from vgpu.kube.adapter import KubeCluster, connect

#: Where the suite's Prometheus stand-in lives, and its account.
MONITORING = "monitoring"
READER = "prometheus"
#: The components' certificates are self-signed (no metricsServer.certFile): the token is
#: what is checked, as kube-prometheus scrapes kube-scheduler's secure port.
UNVERIFIED = ssl.create_default_context()
UNVERIFIED.check_hostname, UNVERIFIED.verify_mode = False, ssl.CERT_NONE


def token(port: KubeCluster, namespace: str, account: str, pod: Obj | None = None) -> str:
    """A token of ``account``, bound to ``pod`` when given (its name and uid)."""
    spec: dict[str, Any] = {"expirationSeconds": 3600}
    if pod is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": meta.name(pod),
                                  "uid": meta.uid(pod)}
    answer = port.request_json(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        "request a token", body={"apiVersion": "authentication.k8s.io/v1",
                                 "kind": "TokenRequest", "spec": spec})
    return str(answer["status"]["token"])


def reader_token(cluster: RealCluster) -> str:
    """The token of an account the operator bound to ``vgpu-metrics-reader``."""
    cluster.kubectl("create", "namespace", MONITORING, check=False)
    cluster.kubectl("create", "serviceaccount", "-n", MONITORING, READER, check=False)
    cluster.kubectl("create", "clusterrolebinding", "prometheus-reads-vgpu",
                    "--clusterrole=vgpu-metrics-reader",
                    f"--serviceaccount={MONITORING}:{READER}", check=False)
    return token(api(cluster), MONITORING, READER)


def fetch(pod: Obj, port: int, bearer: str | None) -> tuple[int, str]:
    """``GET https://POD_IP:PORT/metrics`` from this host (it routes the pod network)."""
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    url = f"https://{pod['status']['podIP']}:{port}/metrics"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=10, context=UNVERIFIED) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(pod: Obj, port: int, bearer: str) -> Samples:
    status, text = fetch(pod, port, bearer)
    assert status == 200, (meta.name(pod), status, text)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def as_token(cluster: RealCluster, bearer: str, folder: Path) -> KubeCluster:
    """The API server as the holder of ``bearer`` sees it."""
    cp = cluster.cp
    config = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": "c", "cluster": {"server": cp.server,
                                                     "certificate-authority": str(cp.ca_cert)}}],
              "users": [{"name": "u", "user": {"token": bearer}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
              "current-context": "c"}
    path = folder / f"token-{abs(hash(bearer))}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    port = connect(str(path))
    assert port is not None
    return port


def refused(write: Any) -> str:
    """The API server's refusal of ``write()`` (a call that must fail), as its message."""
    try:
        write()
    except ClusterError as exc:
        return str(exc)
    raise AssertionError("the write went through")


def patch_node(port: KubeCluster, name: str, *, labels: dict[str, str] | None = None,
               annotations: dict[str, str] | None = None) -> Obj:
    body: dict[str, Any] = {"metadata": {}}
    if labels:
        body["metadata"]["labels"] = labels
    if annotations:
        body["metadata"]["annotations"] = annotations
    return port.request_json("PATCH", f"/api/v1/nodes/{name}", f"patch node {name}",
                             body=body, content_type="application/merge-patch+json")


def node(name: str) -> str:
    """A Node object with no kubelet behind it: another node, for the agent to reach for."""
    return json.dumps({"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": name, "labels": {"gpu": "on"}}})


def stolen_scheduler_token_cannot_patch_a_pod(cluster: RealCluster, folder: Path) -> None:
    """With a pod patch, a stolen scheduler token could change any pod's image."""
    port = api(cluster)
    scheduler = component_pods(port, "scheduler")[0]
    thief = as_token(cluster, token(port, NAMESPACE, "vgpu-scheduler", scheduler), folder)
    assert "forbidden" in refused(lambda: thief.patch_annotations(
        "pods", "notebook", {"stolen": "yes"}, WORKLOADS)).lower()


def refused_by_the_webhook(cluster: RealCluster, write: Any, undo: Any) -> str:
    """The webhook's refusal of ``write()``. On 1.20 its registration fails open (no
    matchConditions: every Node and pod status write reaches it), so a call the API server
    could not make in time lets the write through: that is undone and tried again; three
    in a row fail, with the webhook's log."""
    for _ in range(3):
        try:
            write()
        except ClusterError as exc:
            return str(exc)
        undo()
    logs = "".join(cluster.kubectl("logs", "-n", NAMESPACE, "-l",
                                   "app.kubernetes.io/component=webhook", "--tail=40",
                                   check=False).stdout)
    raise AssertionError(f"the write went through, three times; the webhook's log:\n{logs}")


def stolen_agent_token_writes_only_its_own_node(cluster: RealCluster, folder: Path) -> None:
    port = api(cluster)
    (agent,) = component_pods(port, "nodeagent")
    thief = as_token(cluster, token(port, AGENT_NAMESPACE, "vgpu-nodeagent", agent), folder)
    cluster.kubectl("apply", "-f", "-", input_text=node("node-b"))
    try:
        patch_node(thief, NODE, annotations={"vgpu.io/probe": "mine"})
        assert "node-b" in refused_by_the_webhook(cluster, lambda: patch_node(
            thief, "node-b", annotations={"vgpu.io/probe": "not mine"}), lambda: None)
        assert "metadata.labels" in refused_by_the_webhook(
            cluster, lambda: patch_node(thief, NODE, labels={"gpu": "off"}),
            lambda: patch_node(port, NODE, labels={"gpu": "on"}))
    finally:
        cluster.kubectl("delete", "node", "node-b", "--wait=false", check=False)
    assert meta.labels_of(port.get("nodes", NODE))["gpu"] == "on"


def metrics_show_the_grants(cluster: RealCluster, granted_mib: int) -> None:
    port, reader = api(cluster), reader_token(cluster)
    mib = 1024 * 1024
    (agent,) = component_pods(port, "nodeagent")
    samples = scrape(agent, 9394, reader)
    assert sample_sum(samples, "vgpu_container_memory_granted_bytes",
                      namespace=WORKLOADS, pod="notebook") == 3000 * mib
    assert sample_sum(samples, "vgpu_container_memory_granted_bytes",
                      namespace=WORKLOADS) == granted_mib * mib
    leader = port.get("pods", port.get("leases", "vgpu-scheduler", NAMESPACE)["spec"][
        "holderIdentity"], NAMESPACE)
    samples = scrape(leader, 9396, reader)
    assert sample_sum(samples, "vgpu_scheduler_node_gpu_memory_allocated_bytes",
                      node=NODE) == granted_mib * mib
    assert sample_sum(samples, "vgpu_scheduler_bindings_total", result="success") >= 2
    mutated = sum(sample_sum(scrape(hook, 9395, reader), "vgpu_webhook_requests_total",
                             outcome="mutated") for hook in component_pods(port, "webhook"))
    assert mutated >= 2
    # The tenant's own token, and none, are refused; the probes stay open to all.
    tenant = token(port, WORKLOADS, "default")
    assert fetch(agent, 9394, tenant)[0] == 403 and fetch(leader, 9396, None)[0] == 403
    service = port.request_json("GET", f"/api/v1/namespaces/{NAMESPACE}/services/vgpu-webhook",
                                "get the webhook's Service")
    assert [p["name"] for p in service["spec"]["ports"]] == ["https"]
