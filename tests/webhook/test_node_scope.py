"""The node agents on their own node: ``/node-scope`` (vgpu_webhook.node_scope) and its
ValidatingAdmissionPolicy, table-driven, the policy's CEL evaluated with cel-python
against the same cases (it must deny exactly what the webhook denies, given the node the
token names)."""

from __future__ import annotations

import copy
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import celpy
import pytest
import yaml

from tests.webhook import certs
from vgpu.config import Config
from vgpu.errors import ClusterError, NotFoundError
from vgpu_webhook.admission_server import WebhookServer
from vgpu_webhook.agent_nodes import AgentNodes
from vgpu_webhook.component_policies import node_scope_policy, node_scope_webhook
from vgpu_webhook.gpus import GpuView
from vgpu_webhook.node_scope import NODE_NAME, POD_NAME, POD_UID, decide, identity
from vgpu_webhook.tls import CertReloader

CONFIG = Config()
(AGENT,) = CONFIG.webhook.node_agents
AGENTS = CONFIG.webhook.node_agents
MANIFESTS = Path(__file__).parents[2] / "manifests"

NODE_A = {"apiVersion": "v1", "kind": "Node",
          "metadata": {"name": "node-a", "labels": {"gpu": "on"},
                       "annotations": {"vgpu.io/node-heartbeat": "1", "team": "x"},
                       "resourceVersion": "7", "managedFields": [{"manager": "kubelet"}]},
          "spec": {"podCIDR": "10.0.0.0/24"}, "status": {"capacity": {"cpu": "8"}}}
NODE_B = {**copy.deepcopy(NODE_A), "metadata": {**NODE_A["metadata"], "name": "node-b"}}
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p", "namespace": "team-a", "uid": "u1", "labels": {"app": "x"},
                    "annotations": {"vgpu.io/bind-phase": "allocating", "note": "n"}},
       "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}]},
       "status": {"phase": "Pending", "conditions": [
           {"type": "PodScheduled", "status": "True"}]}}
POD_ELSEWHERE = {**copy.deepcopy(POD), "spec": {**POD["spec"], "nodeName": "node-b"}}


def changed(obj: dict[str, Any], **paths: Any) -> dict[str, Any]:
    """A copy with ``a__b=value`` set at ``obj[a][b]`` (None removes it)."""
    out = copy.deepcopy(obj)
    for path, value in paths.items():
        *parents, last = path.split("__")
        where = out
        for key in parents:
            where = where.setdefault(key, {})
        if value is None:
            where.pop(last, None)
        else:
            where[last] = value
    return out


def review(old: dict[str, Any], new: dict[str, Any], *, sub: str = "", user: str = AGENT,
           node: str | None = "node-a", operation: str = "UPDATE") -> dict[str, Any]:
    plural = "nodes" if old["kind"] == "Node" else "pods"
    extra = {NODE_NAME: [node]} if node else {}
    return {"uid": "r", "kind": {"group": "", "version": "v1", "kind": old["kind"]},
            "resource": {"group": "", "version": "v1", "resource": plural},
            "subResource": sub, "name": old["metadata"]["name"],
            "namespace": old["metadata"].get("namespace", ""), "operation": operation,
            "userInfo": {"username": user, "extra": extra}, "object": new, "oldObject": old}


HEARTBEAT = {"vgpu.io/node-heartbeat": "2", "team": "x"}
SERVED = {"vgpu.io/bind-phase": "success", "note": "n"}
VGPU_CONDITION = [{"type": "PodScheduled", "status": "True"},
                  {"type": "vgpu.io/Allocated", "status": "True", "message": "{}"}]
CASES = [
    ("its own node's heartbeat", review(NODE_A, changed(
        NODE_A, metadata__annotations=HEARTBEAT)), False),
    ("its own node's vgpu annotation removed", review(NODE_A, changed(
        NODE_A, metadata__annotations={"team": "x"})), False),
    ("another node's heartbeat", review(NODE_B, changed(
        NODE_B, metadata__annotations=HEARTBEAT)), True),
    ("a label of its own node", review(NODE_A, changed(
        NODE_A, metadata__labels={"gpu": "off"})), True),
    ("a taint on its own node", review(NODE_A, changed(
        NODE_A, spec__taints=[{"key": "x", "effect": "NoSchedule"}])), True),
    ("cordoning its own node", review(NODE_A, changed(NODE_A, spec__unschedulable=True)),
     True),
    ("another annotation of its own node", review(NODE_A, changed(
        NODE_A, metadata__annotations={**HEARTBEAT, "team": "y"})), True),
    ("the served record of a pod on its node", review(POD, changed(
        POD, metadata__annotations=SERVED, status__conditions=VGPU_CONDITION),
        sub="status"), False),
    ("the served record of a pod on another node", review(POD_ELSEWHERE, changed(
        POD_ELSEWHERE, metadata__annotations=SERVED, status__conditions=VGPU_CONDITION),
        sub="status"), True),
    ("a pod's phase", review(POD, changed(POD, status__phase="Failed"), sub="status"), True),
    ("a pod's PodScheduled condition", review(POD, changed(
        POD, status__conditions=[{"type": "PodScheduled", "status": "False"}]),
        sub="status"), True),
    ("a pod's label through its status", review(POD, changed(
        POD, metadata__labels={"app": "y"}), sub="status"), True),
    ("a pod's image", review(POD, changed(
        POD, spec__containers=[{"name": "c", "image": "evil"}])), True),
    ("a write whose token names no node", review(NODE_A, changed(
        NODE_A, metadata__annotations=HEARTBEAT), node=None), True),
    ("not an agent: the kubelet's own status write", review(POD, changed(
        POD, status__phase="Running"), sub="status", user="system:node:node-b"), False),
    ("not an agent: an operator cordons a node", review(NODE_B, changed(
        NODE_B, spec__unschedulable=True), user="admin"), False),
]


@pytest.mark.parametrize(("what", "request_", "denied"), CASES, ids=[c[0] for c in CASES])
def test_the_webhook(what: str, request_: dict[str, Any], denied: bool) -> None:
    verdict = decide(request_, AGENTS, identity(request_).node or None)
    assert verdict.allowed is not denied, verdict.message
    if denied:
        assert verdict.code == 403 and "node agent" in verdict.message


def test_the_message_says_what_the_write_touched() -> None:
    verdict = decide(review(NODE_A, changed(NODE_A, metadata__labels={})), AGENTS, "node-a")
    assert "metadata.labels" in verdict.message
    verdict = decide(review(NODE_B, NODE_B), AGENTS, "node-a")
    assert "nodes node-b" in verdict.message and "another node" in verdict.message


@pytest.mark.parametrize(("operation", "sub"), [("CREATE", ""), ("DELETE", ""),
                                                ("UPDATE", "eviction")])
def test_an_agent_writes_nothing_else(operation: str, sub: str) -> None:
    request = review(POD, POD, operation=operation, sub=sub)
    assert not decide(request, AGENTS, "node-a").allowed


# -- the registrations ------------------------------------------------------------------


def test_the_manifests_carry_the_generated_registrations() -> None:
    config = yaml.safe_load((MANIFESTS / "webhook" / "validatingwebhookconfiguration.yaml")
                            .read_text())
    hooks = {w["name"]: w for w in config["webhooks"]}
    assert hooks["node-scope.vgpu.io"] == node_scope_webhook(CONFIG)
    # No namespaceSelector: a pod in kube-system is no less another node's.
    assert "namespaceSelector" not in hooks["node-scope.vgpu.io"]
    policy = list(yaml.safe_load_all((MANIFESTS / "policy" / "node-scope-policy.yaml")
                                     .read_text()))
    assert policy == node_scope_policy(CONFIG)


class Cel:
    def __init__(self) -> None:
        env = celpy.Environment()
        hook = node_scope_webhook(CONFIG)
        vap, _ = node_scope_policy(CONFIG)
        self.hook = [env.program(env.compile(c["expression"]))
                     for c in hook["matchConditions"]]
        self.conditions = [env.program(env.compile(c["expression"]))
                           for c in vap["spec"]["matchConditions"]]
        self.variables = [(v["name"], env.program(env.compile(v["expression"])))
                          for v in vap["spec"]["variables"]]
        self.validations = [env.program(env.compile(v["expression"]))
                            for v in vap["spec"]["validations"]]
        self.message = env.program(env.compile(
            vap["spec"]["validations"][0]["messageExpression"]))

    @staticmethod
    def activation(request: dict[str, Any], variables: dict[str, Any] | None = None,
                   ) -> dict[str, Any]:
        values: dict[str, Any] = {
            "object": request["object"], "oldObject": request["oldObject"],
            "request": {k: request[k] for k in ("userInfo", "subResource", "operation",
                                                "resource", "name")}}
        if variables is not None:
            values["variables"] = variables
        return {k: celpy.json_to_cel(v) for k, v in values.items()}

    def policy_denies(self, request: dict[str, Any]) -> bool:
        act = self.activation(request)
        if not all(bool(p.evaluate(act)) for p in self.conditions):
            return False
        variables = {name: str(p.evaluate(act)) for name, p in self.variables}
        act = self.activation(request, variables)
        return not all(bool(p.evaluate(act)) for p in self.validations)


@pytest.fixture(scope="module")
def cel() -> Cel:
    return Cel()


@pytest.mark.parametrize(("what", "request_", "denied"), CASES, ids=[c[0] for c in CASES])
def test_the_policy_denies_what_the_webhook_denies(cel: Cel, what: str,
                                                   request_: dict[str, Any],
                                                   denied: bool) -> None:
    assert cel.policy_denies(request_) is denied
    # The webhook is called for the agents' writes only.
    act = cel.activation(request_)
    called = all(bool(p.evaluate(act)) for p in cel.hook)
    assert called is (request_["userInfo"]["username"] == AGENT)


# -- which node: the token's, else its pod's --------------------------------------------


class Pods:
    def __init__(self, pods: dict[tuple[str, str], dict[str, Any]],
                 error: ClusterError | None = None) -> None:
        self.pods, self.error, self.gets = pods, error, 0

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.gets += 1
        if self.error is not None:
            raise self.error
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
