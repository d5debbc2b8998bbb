"""The node agents on their own node: ``/node-scope`` (vgpu_webhook.node_scope) and its
ValidatingAdmissionPolicy, table-driven, the policy's CEL evaluated with cel-python
against the same cases (it must deny exactly what the webhook denies, given the node the
token names)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from vgpu.config import Config
from vgpu_webhook.component_policies import node_scope_policy, node_scope_webhook
from vgpu_webhook.node_scope import NODE_NAME, decide, identity, stored_to_read

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


# -- a review whose oldObject already carries the write (1.20's Node PATCH) ---------------

RELABELLED = changed(NODE_A, metadata__labels={"gpu": "off"})
#: What the 1.20.2 API server sends for the agent's label PATCH: oldObject == object.
ALIASED = review(RELABELLED, RELABELLED)
STORED_CASES = [
    ("a label, seen against the stored Node", ALIASED, NODE_A, True),
    ("a taint, seen against the stored Node", review(*[changed(
        NODE_A, spec__taints=[{"key": "x", "effect": "NoSchedule"}])] * 2), NODE_A, True),
    ("its heartbeat, seen against the stored Node", review(*[changed(
        NODE_A, metadata__annotations=HEARTBEAT)] * 2), NODE_A, False),
    ("the kubelet's newer status in the stored Node", review(*[changed(
        NODE_A, metadata__annotations=HEARTBEAT)] * 2), changed(
        NODE_A, status__capacity={"cpu": "16"}, metadata__resourceVersion="9"), False),
    ("a label another writer set since: the agent writes again", review(NODE_A, NODE_A),
     changed(NODE_A, metadata__labels={"gpu": "on", "zone": "b"}), True),
]


@pytest.mark.parametrize(("what", "request_", "stored", "denied"), STORED_CASES,
                         ids=[c[0] for c in STORED_CASES])
def test_a_node_write_that_shows_no_change_is_seen_against_the_stored_node(
        what: str, request_: dict[str, Any], stored: dict[str, Any], denied: bool) -> None:
    assert stored_to_read(request_, AGENTS) == "node-a"
    verdict = decide(request_, AGENTS, "node-a", stored)
    assert verdict.allowed is not denied, verdict.message
    # Without the stored Node the aliased review reads as no change at all.
    assert decide(request_, AGENTS, "node-a").allowed


@pytest.mark.parametrize(("what", "request_"), [
    ("a write that shows its change", review(NODE_A, RELABELLED)),
    ("not an agent's", review(RELABELLED, RELABELLED, user="admin")),
    ("a pod's status", review(POD, POD, sub="status")),
])
def test_no_stored_node_is_read_for(what: str, request_: dict[str, Any]) -> None:
    assert stored_to_read(request_, AGENTS) == "", what


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
