"""The validating registrations: the webhook's configuration and the ValidatingAdmissionPolicy,
their fields, and their CEL evaluated offline (cel-python) against the Python rule
(:func:`vgpu_webhook.validate.validate`) they stand for.

The webhook's matchConditions must be true exactly for what ``/validate`` denies (the webhook
is then called only to say no, and never misses a write it must refuse); the policy must
deny exactly what ``/validate`` denies. Kubernetes evaluates ``variables`` lazily by name;
here each is evaluated first and handed in as ``variables``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.pods import ctr, pod
from vgpu.config import Config
from vgpu_webhook.registration import admission_policy, validate_conditions
from vgpu_webhook.validate import validate

MANIFESTS = Path(__file__).parents[2] / "manifests"
WEBHOOK = MANIFESTS / "webhook" / "validatingwebhookconfiguration.yaml"
POLICY = MANIFESTS / "policy" / "validatingadmissionpolicy.yaml"
CONFIG = Config()
SCHEDULER, AGENT = CONFIG.webhook.annotation_writers
TENANT = "alice"


def _compile(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression))


@pytest.fixture(scope="module")
def hook() -> dict[str, Any]:
    document = yaml.safe_load(WEBHOOK.read_text())
    assert document["kind"] == "ValidatingWebhookConfiguration"
    (only,) = [w for w in document["webhooks"] if w["name"] == "validate.vgpu.io"]
    result: dict[str, Any] = only
    return result


@pytest.fixture(scope="module")
def policy() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(POLICY.read_text()))


def test_webhook_fields(hook: dict[str, Any]) -> None:
    assert hook["name"] == "validate.vgpu.io"
    assert hook["clientConfig"]["service"] == {"name": "vgpu-webhook",
                                               "namespace": "vgpu-system",
                                               "path": "/validate", "port": 443}
    (rule,) = hook["rules"]
    assert rule["operations"] == ["CREATE", "UPDATE"]
    # Never pods/status: the kubelet's status writes stay off the webhook.
    assert rule["resources"] == ["pods", "pods/ephemeralcontainers"]
    assert (hook["failurePolicy"], hook["sideEffects"]) == ("Fail", "None")
    assert hook["admissionReviewVersions"] == ["v1"] and 1 <= hook["timeoutSeconds"] <= 5
    (expr,) = hook["namespaceSelector"]["matchExpressions"]
    assert (expr["key"], expr["operator"]) == ("kubernetes.io/metadata.name", "NotIn")


def test_webhook_conditions_are_the_generated_ones(hook: dict[str, Any]) -> None:
    assert hook["matchConditions"] == validate_conditions(CONFIG)


def test_policy_is_the_generated_one(policy: list[dict[str, Any]]) -> None:
    assert policy == admission_policy(CONFIG)
    vap, binding = policy
    assert binding["spec"] == {"policyName": vap["metadata"]["name"],
                               "validationActions": ["Deny"]}
    assert vap["spec"]["failurePolicy"] == "Fail"
    assert vap["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == [
        "pods", "pods/ephemeralcontainers", "pods/status"]


class Cel:
    """The registrations' CEL compiled once."""

    def __init__(self) -> None:
        self.conditions = [_compile(c["expression"]) for c in validate_conditions(CONFIG)]
        spec = admission_policy(CONFIG)[0]["spec"]
        self.policy_conditions = [_compile(c["expression"]) for c in spec["matchConditions"]]
        self.variables = [(v["name"], _compile(v["expression"])) for v in spec["variables"]]
        self.validations = [_compile(v["expression"]) for v in spec["validations"]]
        self.message = _compile(spec["validations"][0]["messageExpression"])

    @staticmethod
    def activation(request: dict[str, Any], variables: dict[str, Any] | None = None,
                   ) -> dict[str, Any]:
        values = {"object": request["object"], "oldObject": request["oldObject"],
                  "request": {"userInfo": request["userInfo"],
                              "subResource": request.get("subResource", ""),
                              "operation": request["operation"]}}
        if variables is not None:
            values["variables"] = variables
        return {k: celpy.json_to_cel(v) for k, v in values.items()}

    def webhook_called(self, request: dict[str, Any]) -> bool:
        act = self.activation(request)
        return all(bool(p.evaluate(act)) for p in self.conditions)

    def policy_denies(self, request: dict[str, Any]) -> bool:
        act = self.activation(request)
        if not all(bool(p.evaluate(act)) for p in self.policy_conditions):
            return False
        variables = {name: bool(p.evaluate(act)) for name, p in self.variables}
        act = self.activation(request, variables)
        return not all(bool(p.evaluate(act)) for p in self.validations)


@pytest.fixture(scope="module")
def cel() -> Cel:
    return Cel()


def request_of(operation: str, new: dict[str, Any] | None, old: dict[str, Any] | None,
               user: str = TENANT, sub: str = "") -> dict[str, Any]:
    return {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": operation, "subResource": sub, "userInfo": {"username": user},
            "object": new, "oldObject": old}


GPU_POD = pod(ctr("c", {"nvidia.com/gpu": "1"}))
CPU_POD = pod(ctr("c", {"cpu": "1"}))


def noted(base: dict[str, Any], annotations: dict[str, str] | None) -> dict[str, Any]:
    out = copy.deepcopy(base)
    if annotations is not None:
        out["metadata"]["annotations"] = annotations
    return out


PLACED = {"vgpu.io/assignment": "{...}", "vgpu.io/bind-phase": "success",
          "vgpu.io/admission": "{}", "app": "x"}

CASES = [
    ("create a GPU pod with no annotation", request_of("CREATE", GPU_POD, None), False),
    ("create with the webhook's own record on a GPU pod",
     request_of("CREATE", noted(GPU_POD, {"vgpu.io/admission": "{}",
                                          "vgpu.io/gpumem-percentage": "{}"}), None), False),
    ("create a CPU pod carrying the webhook's record",
     request_of("CREATE", noted(CPU_POD, {"vgpu.io/admission": "{}"}), None), True),
    ("create with a forged assignment",
     request_of("CREATE", noted(GPU_POD, {"vgpu.io/assignment": "{}"}), None), True),
    ("create a CPU pod with a forged assignment and bind phase",
     request_of("CREATE", noted(CPU_POD, {"vgpu.io/assignment": "{}",
                                          "vgpu.io/bind-phase": "allocating"}), None), True),
    ("create with the user annotations", request_of("CREATE", noted(GPU_POD, {
        "vgpu.io/gpu-scheduler-policy": "binpack", "vgpu.io/node-scheduler-policy": "spread",
        "vgpu.io/require-isolation": "true", "hami.io/gpu-scheduler-policy": "spread"}),
        None), False),
    ("the scheduler's service account may create anything",
     request_of("CREATE", noted(CPU_POD, {"vgpu.io/assignment": "{}"}), None,
                user=SCHEDULER), False),
    ("tenant relabels a placed pod", request_of(
        "UPDATE", noted(GPU_POD, {**PLACED, "app": "y"}), noted(GPU_POD, PLACED)), False),
    ("tenant removes the assignment", request_of(
        "UPDATE", noted(GPU_POD, {k: v for k, v in PLACED.items()
                                  if k != "vgpu.io/assignment"}),
        noted(GPU_POD, PLACED)), True),
    ("tenant removes every annotation", request_of(
        "UPDATE", noted(GPU_POD, None), noted(GPU_POD, PLACED)), True),
    ("tenant edits the bind phase", request_of(
        "UPDATE", noted(GPU_POD, {**PLACED, "vgpu.io/bind-phase": "allocating"}),
        noted(GPU_POD, PLACED)), True),
    ("tenant adds an assignment to a running pod", request_of(
        "UPDATE", noted(CPU_POD, {"vgpu.io/assignment": "{}"}), noted(CPU_POD, None)), True),
    ("tenant changes a user annotation", request_of(
        "UPDATE", noted(GPU_POD, {**PLACED, "vgpu.io/gpu-scheduler-policy": "spread"}),
        noted(GPU_POD, PLACED)), False),
    ("the node agent writes the bind phase", request_of(
        "UPDATE", noted(GPU_POD, {**PLACED, "vgpu.io/bind-phase": "failed"}),
        noted(GPU_POD, PLACED), user=AGENT), False),
    # A status write can change annotations (seen on 1.20.2); only the policy sees those.
    ("a status write that edits the assignment", request_of(
        "UPDATE", noted(GPU_POD, {**PLACED, "vgpu.io/assignment": "{}x"}),
        noted(GPU_POD, PLACED), user="system:node:n1", sub="status"), True),
    ("the kubelet's status write", request_of(
        "UPDATE", noted(GPU_POD, PLACED), noted(GPU_POD, PLACED), user="system:node:n1",
        sub="status"), False),
]


@pytest.mark.parametrize(("what", "request_", "denied"), CASES, ids=[c[0] for c in CASES])
def test_cases(cel: Cel, what: str, request_: dict[str, Any], denied: bool) -> None:
    decision = validate(request_, CONFIG)
    assert decision.allowed is not denied, decision.message
    assert cel.webhook_called(request_) is denied
    assert cel.policy_denies(request_) is denied


def ephemeral(base: dict[str, Any], *names: str) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["spec"]["ephemeralContainers"] = [{"name": n, "image": "busybox"} for n in names]
    return out


@pytest.mark.parametrize(("what", "new", "old", "denied"), [
    ("debug container joins a GPU pod", ephemeral(GPU_POD, "dbg"), GPU_POD, True),
    ("a second one joins a GPU pod", ephemeral(GPU_POD, "a", "b"), ephemeral(GPU_POD, "a"),
     True),
    ("debug container joins a CPU pod", ephemeral(CPU_POD, "dbg"), CPU_POD, False),
    ("nothing added", ephemeral(GPU_POD, "a"), ephemeral(GPU_POD, "a"), False),
])
def test_ephemeral_containers(cel: Cel, what: str, new: dict[str, Any], old: dict[str, Any],
                              denied: bool) -> None:
    req = request_of("UPDATE", new, old, sub="ephemeralcontainers")
    assert validate(req, CONFIG).allowed is not denied
    assert cel.policy_denies(req) is denied
    assert cel.webhook_called(req)  # any ephemeral write is sent; /validate decides


def test_policy_message_names_the_user(cel: Cel) -> None:
    req = request_of("CREATE", noted(CPU_POD, {"vgpu.io/assignment": "{}"}), None)
    text = str(cel.message.evaluate(cel.activation(req)))
    assert f"not {TENANT};" in text and "belong to vgpu" in text


KEYS = st.sampled_from([
    "vgpu.io/assignment", "vgpu.io/bind-phase", "vgpu.io/allocation", "vgpu.io/isolation",
    "vgpu.io/admission", "vgpu.io/gpumem-percentage", "vgpu.io/anything-new",
    "vgpu.io/gpu-scheduler-policy", "vgpu.io/node-scheduler-policy",
    "vgpu.io/require-isolation", "hami.io/gpu-scheduler-policy", "app", "vgpu.io",
    "xvgpu.io/assignment", "nvidia.com/use-gputype"])
NOTES = st.one_of(st.none(), st.dictionaries(KEYS, st.sampled_from(["a", "b", ""]),
                                             max_size=4))


@settings(max_examples=150, deadline=None)
@given(operation=st.sampled_from(["CREATE", "UPDATE"]), gpu=st.booleans(), new=NOTES,
       old=NOTES, user=st.sampled_from([TENANT, SCHEDULER, AGENT, "system:node:n1"]))
def test_cel_agrees_with_validate(cel: Cel, *, operation: str, gpu: bool,
                                  new: dict[str, str] | None, old: dict[str, str] | None,
                                  user: str) -> None:
    base = GPU_POD if gpu else CPU_POD
    req = request_of(operation, noted(base, new),
                     noted(base, old) if operation == "UPDATE" else None, user=user)
    denied = not validate(req, CONFIG).allowed
    assert cel.webhook_called(req) is denied
    assert cel.policy_denies(req) is denied
