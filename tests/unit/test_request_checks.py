"""What the webhook and the scheduler ask of a pod besides its parsed request.

Which GPUs its annotations allow (the ``GpuSelector``), whether it names a GPU resource at
all (``names_gpu_resource``, the webhook's cheap test that never raises; ``parse_gpu_pod``,
that test and the parse in one walk) and which of its GPU containers are privileged.
Separate from ``test_requests``, which pins the parsed per-container requests themselves.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from tests.unit.requests_support import CORES, CUSTOM, DEFAULT, GPU, MEM, PRIO, ctr, json_like, pod
from vgpu.errors import RequestError
from vgpu.requests import names_gpu_resource, parse_gpu_pod, parse_pod

# --- annotations select GPUs -------------------------------------------------------------

@pytest.mark.parametrize(
    ("annotations", "model", "uuid", "allowed"),
    [
        ({"nvidia.com/use-gputype": "a100"}, "NVIDIA A100-SXM4-40GB", "GPU-1", True),
        ({"nvidia.com/use-gputype": "A100"}, "nvidia a100-pcie", "GPU-1", True),
        ({"nvidia.com/use-gputype": "A100,V100"}, "Tesla V100-SXM2-32GB", "GPU-1", True),
        ({"nvidia.com/use-gputype": "A100,V100"}, "NVIDIA H100 80GB HBM3", "GPU-1", False),
        ({"nvidia.com/nouse-gputype": "1080,2080"}, "GeForce GTX 1080 Ti", "GPU-1", False),
        ({"nvidia.com/nouse-gputype": "1080,2080"}, "GeForce RTX 3090", "GPU-1", True),
        ({"nvidia.com/nouse-gputype": "t4"}, "Tesla T4", "GPU-1", False),
        ({"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "40GB"},
         "NVIDIA A100-SXM4-40GB", "GPU-1", False),
        ({"nvidia.com/use-gpuuuid": "GPU-1,GPU-2"}, "any", "GPU-2", True),
        ({"nvidia.com/use-gpuuuid": "GPU-1"}, "any", "GPU-12", False),
        ({"nvidia.com/use-gpuuuid": "gpu-1"}, "any", "GPU-1", False),
        ({"nvidia.com/nouse-gpuuuid": "GPU-1"}, "any", "GPU-1", False),
        ({"nvidia.com/nouse-gpuuuid": "GPU-1"}, "any", "GPU-10", True),
        ({}, "anything", "GPU-x", True),
    ],
    ids=["use-type-lower-matches-upper", "use-type-upper-matches-lower", "use-type-list",
         "use-type-list-miss", "nouse-type-substring", "nouse-type-miss", "nouse-type-case",
         "use-and-nouse-type", "use-uuid-list", "use-uuid-exact-not-prefix",
         "use-uuid-case-sensitive", "nouse-uuid", "nouse-uuid-exact", "unrestricted"],
)


def test_selector_from_annotations(annotations: dict[str, str], model: str, uuid: str,
                                   allowed: bool) -> None:
    selector = parse_pod(pod(ctr(limits={GPU: 1}), annotations=annotations), DEFAULT
                         ).choices.selector
    assert (selector.type_allowed(model) and selector.uuid_allowed(uuid)) is allowed
    assert selector.unrestricted is (not annotations)


# --- names_gpu_resource: the webhook's cheap test, never raises ------------------------------

NAMES: list[tuple[str, Any, bool]] = [
    ("gpu-in-limits", pod(ctr(limits={GPU: 1})), True),
    ("gpumem-in-requests", pod(ctr(requests={MEM: 10})), True),
    ("priority-only", pod(ctr(limits={PRIO: 1})), True),
    ("init-container-only", pod(ctr("a"), init=(ctr("i", {CORES: 5}),)), True),
    ("bad-quantity-still-names-it", pod(ctr(limits={GPU: "junk"})), True),
    ("cpu-only", pod(ctr(limits={"cpu": "1", "memory": "1Gi"})), False),
    ("other-vendor", pod(ctr(limits={"amd.com/gpu": 1})), False),
    ("no-containers", {"spec": {}}, False),
    ("none", None, False),
    ("list", [], False),
    ("string", "pod", False),
    ("spec-list", {"spec": []}, False),
    ("containers-string", {"spec": {"containers": "abc"}}, False),
    ("container-string", {"spec": {"containers": ["abc", 1, None]}}, False),
    ("resources-list", {"spec": {"containers": [{"resources": [GPU]}]}}, False),
    ("limits-list", {"spec": {"containers": [{"resources": {"limits": [GPU]}}]}}, False),
    ("limits-string", {"spec": {"containers": [{"resources": {"limits": GPU}}]}}, False),
    ("odd-keys", {"spec": {"containers": [{"resources": {"limits": {1: 2, (3,): 4}}}]}},
     False),
    ("garbage-then-gpu",
     {"spec": {"containers": ["x", {"resources": None}, {"resources": {"limits": {GPU: 1}}}]}},
     True),
]


@pytest.mark.parametrize(("obj", "expected"), [n[1:] for n in NAMES], ids=[n[0] for n in NAMES])
def test_names_gpu_resource(obj: Any, expected: bool) -> None:
    assert names_gpu_resource(obj, DEFAULT) is expected


def test_names_gpu_resource_uses_configured_names() -> None:
    assert names_gpu_resource(pod(ctr(limits={"example.com/vcores": 1})), CUSTOM) is True
    assert names_gpu_resource(pod(ctr(limits={GPU: 1})), CUSTOM) is False


@settings(max_examples=100, deadline=None)
@given(json_like)
def test_names_gpu_resource_never_raises(obj: Any) -> None:
    assert names_gpu_resource(obj, DEFAULT) in (True, False)


# --- parse_gpu_pod: the webhook's one parse ------------------------------------------------

def test_parse_gpu_pod_keeps_each_containers_place() -> None:
    obj = pod(ctr("app"), ctr("gpu", {GPU: 2}), init=(ctr("setup", {MEM: 100}),))
    parsed = parse_gpu_pod(obj, DEFAULT)
    assert parsed is not None
    assert [(c.key, c.position, c.init, c.name) for c in parsed.containers] == [
        ("initContainers", 0, True, "setup"), ("containers", 0, False, "app"),
        ("containers", 1, False, "gpu")]
    for c in parsed.containers:
        assert c.container is obj["spec"][c.key][c.position]
        assert c.request == next((r for r in parsed.request.containers if r.name == c.name),
                                 None)
    assert parsed.request == parse_pod(obj, DEFAULT)


def _agrees_with_the_two_steps(obj: Any) -> None:
    """parse_gpu_pod is names_gpu_resource, then parse_pod: in one walk."""
    if not names_gpu_resource(obj, DEFAULT):
        assert parse_gpu_pod(obj, DEFAULT) is None
        return
    try:
        expected = parse_pod(obj, DEFAULT)
    except RequestError as exc:
        with pytest.raises(RequestError) as raised:
            parse_gpu_pod(obj, DEFAULT)
        assert str(raised.value) == str(exc)
        return
    parsed = parse_gpu_pod(obj, DEFAULT)
    assert parsed is not None and parsed.request == expected


@pytest.mark.parametrize("obj", [n[1] for n in NAMES] + [
    pod(ctr(limits={GPU: None})),  # named, null: a GPU pod that asks for nothing
    pod(ctr("a"), ctr("a", {GPU: 1})),
    pod(ctr(limits={"cpu": "1"}), annotations={"nvidia.com/use-gputype": 5}),
    pod(ctr(limits={GPU: 1}), annotations={"vgpu.io/gpu-policy": "nonsense"}),
    {"metadata": [], "spec": {"containers": [{"name": "a", "resources": {"limits": {GPU: 1}}}]}},
    {"metadata": [], "spec": {"containers": [{"name": "a"}]}},
], ids=[n[0] for n in NAMES] + ["null-value", "duplicate-names", "cpu-pod-bad-annotation",
                                "gpu-pod-bad-annotation", "gpu-pod-bad-metadata",
                                "cpu-pod-bad-metadata"])
def test_parse_gpu_pod_is_the_cheap_test_then_the_parse(obj: Any) -> None:
    _agrees_with_the_two_steps(obj)


@settings(max_examples=200, deadline=None)
@given(json_like)
def test_parse_gpu_pod_agrees_on_anything(obj: Any) -> None:
    _agrees_with_the_two_steps(obj)
