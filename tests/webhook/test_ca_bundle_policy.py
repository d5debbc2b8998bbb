"""The certificates Job may change only the caBundle of the webhook configurations: the
ValidatingAdmissionPolicy of manifests/policy/ca-bundle-policy.yaml, its CEL evaluated
with cel-python on vgpu's own configurations."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from vgpu_webhook.component_policies import CERTS_USER, ca_bundle_policy

MANIFESTS = Path(__file__).parents[2] / "manifests"
Obj = dict[str, Any]


def configuration(name: str) -> Obj:
    doc: Obj = yaml.safe_load((MANIFESTS / "webhook" / name).read_text())
    return doc


MUTATING = configuration("mutatingwebhookconfiguration.yaml")
VALIDATING = configuration("validatingwebhookconfiguration.yaml")


def test_the_manifest_is_the_generated_policy() -> None:
    policy = list(yaml.safe_load_all((MANIFESTS / "policy" / "ca-bundle-policy.yaml")
                                     .read_text()))
    assert policy == ca_bundle_policy()
    rule = policy[0]["spec"]["matchConstraints"]["resourceRules"][0]
    assert rule["resources"] == ["mutatingwebhookconfigurations",
                                 "validatingwebhookconfigurations"]


def edit(obj: Obj, change: Callable[[Obj], None]) -> Obj:
    out = copy.deepcopy(obj)
    change(out)
    return out


def bundle(obj: Obj) -> None:
    for w in obj["webhooks"]:
        w["clientConfig"]["caBundle"] = "Q0E="


def set_(path: str, value: Any) -> Callable[[Obj], None]:
    def change(obj: Obj) -> None:
        bundle(obj)
        where = obj["webhooks"][0]
        *parents, last = path.split(".")
        for key in parents:
            where = where.setdefault(key, {})
        where[last] = value
    return change


CASES = [
    ("the caBundle", bundle, False),
    ("the Service the webhook is called at", set_("clientConfig.service.name", "evil"), True),
    ("a URL instead of the Service", set_("clientConfig.url", "https://evil.example"), True),
    ("the failure policy", set_("failurePolicy", "Ignore"), True),
    ("the namespaces it sees", set_("namespaceSelector", {}), True),
    ("the rules", set_("rules", []), True),
    ("its match conditions", set_("matchConditions", [{"name": "a", "expression": "false"}]),
     True),
    ("a webhook more", lambda o: o["webhooks"].append({**copy.deepcopy(o["webhooks"][0]),
                                                       "name": "evil.vgpu.io"}), True),
    ("a webhook less", lambda o: o["webhooks"].pop(), True),
    ("a label", lambda o: o["metadata"].setdefault("labels", {}).update(x="y"), True),
]


@pytest.fixture(scope="module")
def policy() -> tuple[Any, Any]:
    spec = ca_bundle_policy()[0]["spec"]
    env = celpy.Environment()
    (condition,) = spec["matchConditions"]
    (validation,) = spec["validations"]
    return (env.program(env.compile(condition["expression"])),
            env.program(env.compile(validation["expression"])))


def denies(policy: tuple[Any, Any], old: Obj, new: Obj, user: str) -> bool:
    condition, validation = policy
    act = {"object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(old),
           "request": celpy.json_to_cel({"userInfo": {"username": user}})}
    return bool(condition.evaluate(act)) and not bool(validation.evaluate(act))


@pytest.mark.parametrize("config", [MUTATING, VALIDATING], ids=["mutating", "validating"])
@pytest.mark.parametrize(("what", "change", "denied"), CASES, ids=[c[0] for c in CASES])
def test_the_certs_job_changes_only_the_ca_bundle(
        policy: tuple[Any, Any], config: Obj, what: str, change: Callable[[Obj], None],
        denied: bool) -> None:
    old = edit(config, lambda o: None)
    if what == "a webhook less" and len(old["webhooks"]) == 1:
        pytest.skip("one webhook only")
    new = edit(old, change)
    assert denies(policy, old, new, CERTS_USER) is denied
    # Anyone else is the cluster's RBAC's business, not this policy's.
    assert not denies(policy, old, new, "system:admin")
