"""The MutatingWebhookConfiguration: its fields, and its CEL match condition evaluated."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.pods import ctr, pod
from vgpu.config import Config, ResourceNames
from vgpu.requests import names_gpu_resource
from vgpu_webhook.registration import match_expression

MANIFEST = Path(__file__).parents[2] / "manifests" / "webhook" / "mutatingwebhookconfiguration.yaml"
NAMES = ResourceNames()


@pytest.fixture(scope="module")
def hook() -> dict[str, Any]:
    document = yaml.safe_load(MANIFEST.read_text())
    assert document["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert document["kind"] == "MutatingWebhookConfiguration"
    (only,) = document["webhooks"]
    result: dict[str, Any] = only
    return result


def _compile(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression))


@pytest.fixture(scope="module")
def program(hook: dict[str, Any]) -> Any:
    return _compile(hook["matchConditions"][0]["expression"])


def matches(program: Any, obj: dict[str, Any]) -> bool:
    return bool(program.evaluate({"object": celpy.json_to_cel(obj)}))


def test_safety_fields(hook: dict[str, Any]) -> None:
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert 1 <= hook["timeoutSeconds"] <= 5
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["name"].count(".") >= 2, "webhook names must be fully qualified"


def test_only_pod_creation(hook: dict[str, Any]) -> None:
    (rule,) = hook["rules"]
    assert rule["operations"] == ["CREATE"]
    assert rule["apiGroups"] == [""]
    assert rule["resources"] == ["pods"]


def test_service_path(hook: dict[str, Any]) -> None:
    assert hook["clientConfig"]["service"]["path"] == "/mutate"


def test_system_namespaces_excluded(hook: dict[str, Any]) -> None:
    (expr,) = hook["namespaceSelector"]["matchExpressions"]
    assert expr["key"] == "kubernetes.io/metadata.name"
    assert expr["operator"] == "NotIn"
    assert {"kube-system", "vgpu-system"} <= set(expr["values"])


def _normal(text: str) -> str:
    text = re.sub(r"\s+", " ", text.strip())
    return re.sub(r"\( ", "(", text)


def test_expression_is_the_generated_one(hook: dict[str, Any]) -> None:
    (condition,) = hook["matchConditions"]
    assert _normal(condition["expression"]) == _normal(match_expression(NAMES))


SAMPLES = [
    (pod(ctr("c", {"nvidia.com/gpu": "1"})), True),
    (pod(ctr("c", requests={"nvidia.com/gpumem": "3000"})), True),
    (pod(ctr("c", {"cpu": "1"}), init=(ctr("i", {"nvidia.com/gpucores": "10"}),)), True),
    (pod(ctr("a"), ctr("b", {"nvidia.com/priority": "1"})), True),
    (pod(ctr("c", {"nvidia.com/gpumem-percentage": "50"})), True),
    (pod(ctr("c", {"cpu": "1", "memory": "1Gi"})), False),
    (pod(ctr("c")), False),
    (pod({"name": "c", "resources": {}}), False),
    # NVIDIA's own device plugin resources are not vgpu's.
    (pod(ctr("c", {"nvidia.com/mig-1g.5gb": "1"})), False),
    (pod(ctr("c", {"nvidia.com/gpu.shared": "1"})), False),
    (pod(ctr("c"), init=(ctr("i", {"cpu": "1"}),)), False),
]


@pytest.mark.parametrize(("obj", "expected"), SAMPLES)
def test_expression_on_samples(program: Any, obj: dict[str, Any], expected: bool) -> None:
    assert matches(program, obj) is expected
    assert names_gpu_resource(obj, Config()) is expected


def test_expression_follows_renamed_resources() -> None:
    names = ResourceNames(gpu="example.com/vgpu", gpumem="example.com/mem",
                          gpumem_percentage="example.com/pct", gpucores="example.com/cores",
                          priority="example.com/prio")
    renamed = _compile(match_expression(names))
    assert matches(renamed, pod(ctr("c", {"example.com/mem": "1"})))
    assert not matches(renamed, pod(ctr("c", {"nvidia.com/gpu": "1"})))


def test_broken_expression_is_caught_by_the_parser() -> None:
    with pytest.raises(celpy.CELParseError):
        _compile("object.spec.containers.exists(c, ")


RESOURCE = st.sampled_from([*NAMES.all(), "cpu", "memory", "nvidia.com/mig-1g.5gb"])
SECTION = st.one_of(st.none(), st.dictionaries(RESOURCE, st.just("1"), max_size=3))


@st.composite
def containers(draw: st.DrawFn) -> dict[str, Any]:
    return ctr(draw(st.sampled_from(["a", "b", "c"])), draw(SECTION), draw(SECTION))


@settings(max_examples=60, deadline=None)
@given(st.lists(containers(), min_size=1, max_size=3),
       st.lists(containers(), max_size=2))
def test_expression_agrees_with_the_webhook(program: Any, main: list[dict[str, Any]],
                                            init: list[dict[str, Any]]) -> None:
    """The API server sends exactly the pods the webhook would treat as GPU pods."""
    obj = pod(*main, init=tuple(init))
    assert matches(program, obj) is names_gpu_resource(obj, Config())
