"""Which node a node agent's write comes from (vgpu_webhook/agent_nodes.py), and
``/node-scope`` served: the agent's pod read once, a lookup that fails refused as
retryable."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.webhook import certs
from tests.webhook.test_node_scope import (
    AGENT,
    CONFIG,
    HEARTBEAT,
    NODE_A,
    NODE_B,
    changed,
    review,
)
from vgpu.errors import ClusterError, NotFoundError
from vgpu_webhook.admission_server import WebhookServer
from vgpu_webhook.agent_nodes import AgentNodes
from vgpu_webhook.gpus import GpuView
from vgpu_webhook.node_scope import NODE_NAME, POD_NAME, POD_UID, identity
from vgpu_webhook.tls import CertReloader

# -- which node: the token's, else its pod's --------------------------------------------


class Pods:
    def __init__(self, pods: dict[tuple[str, str], dict[str, Any]],
                 error: ClusterError | None = None) -> None:
        self.pods, self.error, self.gets = pods, error, 0
        self.nodes: dict[str, dict[str, Any]] = {}

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.gets += 1
        if self.error is not None:
            raise self.error
        if kind == "nodes":
            return self.nodes[name]
        if (namespace or "", name) not in self.pods:
            raise NotFoundError(f"pod {name} not found")
        return self.pods[(namespace or "", name)]


def bound(pod: str, uid: str) -> dict[str, Any]:
    return {"username": AGENT, "extra": {POD_NAME: [pod], POD_UID: [uid]}}


AGENT_POD = {"metadata": {"name": "vgpu-nodeagent-x", "namespace": "vgpu-node", "uid": "a1"},
             "spec": {"nodeName": "node-a"}}


def test_the_agents_node_is_its_pods_and_read_once() -> None:
    pods = Pods({("vgpu-node", "vgpu-nodeagent-x"): AGENT_POD})
    nodes = AgentNodes(pods)  # type: ignore[arg-type]
    who = identity({"userInfo": bound("vgpu-nodeagent-x", "a1")})
    assert nodes.needs_lookup(who)
    assert nodes.node_of(who) == "node-a"
    assert not nodes.needs_lookup(who) and nodes.node_of(who) == "node-a"
    assert pods.gets == 1


@pytest.mark.parametrize(("info", "why"), [
    (bound("vgpu-nodeagent-x", "other-uid"), "a pod recreated under the name"),
    (bound("vgpu-nodeagent-gone", "a1"), "a pod that is gone"),
    ({"username": AGENT}, "a token bound to no pod"),
    ({"username": AGENT, "extra": {POD_NAME: ["a", "b"], POD_UID: ["a1"]}}, "two pod names"),
])
def test_a_token_that_ties_the_agent_to_no_node(info: dict[str, Any], why: str) -> None:
    nodes = AgentNodes(Pods({("vgpu-node", "vgpu-nodeagent-x"): AGENT_POD}))  # type: ignore[arg-type]
    assert nodes.node_of(identity({"userInfo": info})) is None, why


def test_the_token_named_node_needs_no_lookup_and_a_failed_lookup_raises() -> None:
    pods = Pods({}, error=ClusterError("down"))
    nodes = AgentNodes(pods)  # type: ignore[arg-type]
    named = identity({"userInfo": {"username": AGENT, "extra": {NODE_NAME: ["node-z"]}}})
    assert not nodes.needs_lookup(named) and nodes.node_of(named) == "node-z"
    with pytest.raises(ClusterError):
        nodes.node_of(identity({"userInfo": bound("vgpu-nodeagent-x", "a1")}))


# -- served ------------------------------------------------------------------------------


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, ssl.SSLContext, Pods]]:
    ca = certs.authority()
    ca_file = ca.write(tmp_path / "ca.crt")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    certs.serving(ca, cert_file, key_file)
    pods = Pods({("vgpu-node", "vgpu-nodeagent-x"): AGENT_POD})
    running = WebhookServer(CONFIG, GpuView(), CertReloader(str(cert_file), str(key_file)),
                            host="127.0.0.1", port=0, metrics_port=0,
                            agent_nodes=AgentNodes(pods))  # type: ignore[arg-type]
    await running.start()
    try:
        yield running, ssl.create_default_context(cafile=str(ca_file)), pods
    finally:
        await running.stop()


async def test_node_scope_is_served_and_reads_the_agents_pod(
        served: tuple[WebhookServer, ssl.SSLContext, Pods]) -> None:
    running, tls, pods = served
    heartbeat = changed(NODE_A, metadata__annotations=HEARTBEAT)
    requests = [review(NODE_A, heartbeat, node=None), review(NODE_B, heartbeat, node=None),
                review(NODE_B, NODE_B, user="admin")]
    for request in requests[:2]:
        request["userInfo"]["extra"] = {POD_NAME: ["vgpu-nodeagent-x"], POD_UID: ["a1"]}
    answers = []
    async with aiohttp.ClientSession() as session:
        for i, request in enumerate(requests):
            body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": {**request, "uid": f"u-{i}"}}
            async with session.post(f"https://127.0.0.1:{running.port}/node-scope",
                                    data=json.dumps(body).encode(), ssl=tls) as response:
                assert response.status == 200
                answers.append(json.loads(await response.read())["response"])
        pods.error = ClusterError("the API server is away")
        fresh = {**requests[0], "uid": "u-3",
                 "userInfo": {"username": AGENT,
                              "extra": {POD_NAME: ["vgpu-nodeagent-y"], POD_UID: ["a2"]}}}
        async with session.post(f"https://127.0.0.1:{running.port}/node-scope", ssl=tls,
                                data=json.dumps({"apiVersion": "admission.k8s.io/v1",
                                                 "kind": "AdmissionReview",
                                                 "request": fresh}).encode()) as response:
            answers.append(json.loads(await response.read())["response"])
    assert [a["allowed"] for a in answers] == [True, False, True, False]
    assert answers[1]["status"]["code"] == 403
    # Cannot tell the agent's node: refused, as a retryable answer.
    assert answers[3]["status"]["code"] == 503 and "retry" in answers[3]["status"]["message"]
    assert pods.gets == 2  # the first pod once (cached), the second tried
    assert running.metrics.node_scope["denied"]._value.get() == 2


async def test_a_node_write_that_shows_no_change_is_checked_against_the_stored_node(
        served: tuple[WebhookServer, ssl.SSLContext, Pods]) -> None:
    """As the 1.20.2 API server sends the agent's label PATCH of its Node: oldObject is
    object. The webhook reads the Node and refuses; while it cannot, it refuses too."""
    running, tls, pods = served
    pods.nodes["node-a"] = NODE_A
    relabelled = changed(NODE_A, metadata__labels={"gpu": "off"})
    request = review(relabelled, relabelled, node=None)
    request["userInfo"]["extra"] = {POD_NAME: ["vgpu-nodeagent-x"], POD_UID: ["a1"]}
    answers = []
    async with aiohttp.ClientSession() as session:
        for i in range(2):
            body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": {**request, "uid": f"u-{i}"}}
            async with session.post(f"https://127.0.0.1:{running.port}/node-scope",
                                    data=json.dumps(body).encode(), ssl=tls) as response:
                answers.append(json.loads(await response.read())["response"])
            pods.error = ClusterError("the API server is away")
    assert [a["allowed"] for a in answers] == [False, False]
    assert "metadata.labels" in answers[0]["status"]["message"]
    assert answers[1]["status"]["code"] == 503 and "Node node-a" in answers[1]["status"]["message"]
