"""What a pod says (vgpu.pods) and which pods hold GPU slices (vgpu.usage.claimed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vgpu import meta
from vgpu.codecs import Assignment, GrantedDevice, encode_assignment
from vgpu.errors import CodecError
from vgpu.pods import (
    bind_phase,
    container_names,
    containers,
    is_terminated,
    node_name,
    pod_key,
)
from vgpu.usage import claimed


@pytest.mark.parametrize(("obj", "expected"), [
    ({"metadata": {"annotations": {"a": "1"}}}, {"a": "1"}),
    ({"metadata": {}}, {}),
    ({"metadata": {"annotations": None}}, {}),
    ({"metadata": "garbage"}, {}),
    ({}, {}),
])
def test_annotations_of(obj: dict[str, Any], expected: dict[str, str]) -> None:
    assert dict(meta.annotations_of(obj)) == expected


@pytest.mark.parametrize(("phase", "expected"), [
    ("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False), (None, False),
])
def test_is_terminated(phase: str | None, expected: bool) -> None:
    assert is_terminated({"status": {"phase": phase}}) is expected
    assert is_terminated({}) is False


@pytest.mark.parametrize(("obj", "expected"), [
    ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, True),
    ({"metadata": {"deletionTimestamp": None}}, False),
    ({"metadata": {}}, False),
    ({"metadata": "garbage"}, False),
    ({}, False),
])
def test_is_terminating(obj: dict[str, Any], expected: bool) -> None:
    assert meta.deleting(obj) is expected


@pytest.mark.parametrize(("pod", "key"), [
    ({"metadata": {"namespace": "ml", "name": "train"}}, "ml/train"),
    # The API server puts a pod without a namespace into "default"; so do all readers.
    ({"metadata": {"name": "p"}}, "default/p"),
    ({"metadata": {"namespace": "", "name": "p"}}, "default/p"),
    ({}, "default/"),
    ({"metadata": "garbage"}, "default/"),
])
def test_pod_key(pod: dict[str, Any], key: str) -> None:
    assert pod_key(pod) == key


@pytest.mark.parametrize(("pod", "node", "phase"), [
    ({"spec": {"nodeName": "n1"}, "metadata": {"annotations": {
        "vgpu.io/bind-phase": "allocating"}}}, "n1", "allocating"),
    ({"spec": {"nodeName": ""}}, None, None),
    ({"spec": "garbage", "metadata": None}, None, None),
    ({}, None, None),
])
def test_node_name_and_bind_phase(pod: dict[str, Any], node: str | None,
                                  phase: str | None) -> None:
    assert node_name(pod) == node
    assert bind_phase(pod) == phase


def test_containers_come_in_start_order_with_their_place_in_the_spec() -> None:
    pod = {"spec": {"containers": [{"name": "b"}, {"name": "a"}, "junk"],
                    "initContainers": [{"name": "i"}]}}
    refs = list(containers(pod))
    assert [(r.key, r.position, r.name, r.init) for r in refs] == [
        ("initContainers", 0, "i", True), ("containers", 0, "b", False),
        ("containers", 1, "a", False), ("containers", 2, None, False)]
    assert container_names(pod) == ("i", "b", "a")


@pytest.mark.parametrize("spec", [{}, {"containers": None}, {"containers": {"a": 1}},
                                  {"initContainers": "x"}, "garbage"])
def test_containers_of_malformed_specs_are_skipped_not_raised(spec: Any) -> None:
    assert list(containers({"spec": spec})) == []


ASSIGNED = Assignment("n1", {"main": (GrantedDevice("GPU-1", 1000, 10),)})


SCHEDULERS = frozenset({"vgpu-scheduler", "second-vgpu"})


def _pod(node: str | None = "n1", phase: str = "Running", text: str | None = None,
         deleting: bool = False, scheduler: str | None = "vgpu-scheduler") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "annotations": {}}
    if text is not None:
        meta["annotations"]["vgpu.io/assignment"] = text
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"nodeName": node} if node else {}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(("pod", "holds"), [
    (_pod(text=encode_assignment(ASSIGNED)), True),
    (_pod(phase="Pending", text=encode_assignment(ASSIGNED)), True),  # being allocated
    (_pod(text=encode_assignment(ASSIGNED), deleting=True), True),  # until it is gone
    (_pod(node=None, text=encode_assignment(ASSIGNED)), False),  # never bound
    (_pod(phase="Succeeded", text=encode_assignment(ASSIGNED)), False),
    (_pod(phase="Failed", text=encode_assignment(ASSIGNED)), False),
    (_pod(), False),  # bound by another scheduler, no GPU slices
    (_pod(text=encode_assignment(ASSIGNED), scheduler="second-vgpu"), True),  # trusted too
    # Placed by a scheduler vgpu does not trust, or created on its node: its owner wrote
    # the annotation, and it holds nothing (issue 24).
    (_pod(text=encode_assignment(ASSIGNED), scheduler="other"), False),
    (_pod(text=encode_assignment(ASSIGNED), scheduler=None), False),
    (_pod(text=encode_assignment(ASSIGNED), scheduler="default-scheduler"), False),
])
def test_which_pods_hold_gpu_slices(pod: dict[str, Any], holds: bool) -> None:
    assert (claimed(pod, SCHEDULERS) == ASSIGNED) is holds
    assert holds or claimed(pod, SCHEDULERS) is None


def test_an_unreadable_assignment_of_a_bound_pod_is_an_error_the_caller_reports() -> None:
    with pytest.raises(CodecError, match=r"vgpu\.io/assignment"):
        claimed(_pod(text=json.dumps({"version": 1})), SCHEDULERS)
    assert claimed(_pod(node=None, text="{"), SCHEDULERS) is None  # not bound: not read
    assert claimed(_pod(text="{", scheduler="other"), SCHEDULERS) is None  # not vgpu's
