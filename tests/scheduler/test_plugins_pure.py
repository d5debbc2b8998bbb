"""Table-driven tests of each plugin's pure decision function.

The Kubernetes side: NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit,
the FailedScheduling summary and the binder's annotations. The vGPU plugin's per-GPU fit,
placement and policies are in ``test_vgpu_placement``.
"""

from __future__ import annotations

import pytest

from vgpu import builders, codecs, times
from vgpu.errors import RequestError
from vgpu_scheduler.framework.compute import pod_requests
from vgpu_scheduler.framework.interfaces import Diagnosis
from vgpu_scheduler.framework.objects import (
    Requirement,
    SelectorTerm,
    Taint,
    Toleration,
    parse_required_terms,
    parse_tolerations,
)
from vgpu_scheduler.framework.status import Status, unresolvable, unschedulable
from vgpu_scheduler.host.summary import summarize
from vgpu_scheduler.plugins import binder, node_affinity, node_resources_fit, node_unschedulable
from vgpu_scheduler.plugins import taint_toleration as tt

# --- NodeUnschedulable -------------------------------------------------------------------

CORDON = Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule")


@pytest.mark.parametrize(("unschedulable", "tolerations", "fits"), [
    (False, (), True),
    (True, (), False),
    (True, (CORDON,), True),
    (True, (Toleration("", "Exists"),), True),  # tolerates everything
    (True, (Toleration("other", "Exists"),), False),
    (True, (Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoExecute"),), False),
])


def test_node_unschedulable(unschedulable: bool, tolerations: tuple[Toleration, ...],
                            fits: bool) -> None:
    assert node_unschedulable.fits(unschedulable, tolerations) is fits


# --- TaintToleration ---------------------------------------------------------------------

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(("taints", "tolerations", "blocking"), [
    ((), (), None),
    ((GPU_TAINT,), (), GPU_TAINT),
    ((GPU_TAINT,), (Toleration("nvidia.com/gpu", "Equal", "present"),), None),
    ((GPU_TAINT,), (Toleration("nvidia.com/gpu", "Equal", "absent"),), GPU_TAINT),
    ((GPU_TAINT,), (Toleration("nvidia.com/gpu", "Exists"),), None),
    ((GPU_TAINT,), (Toleration("nvidia.com/gpu", "Exists", "", "NoExecute"),), GPU_TAINT),
    ((Taint("soft", "", "PreferNoSchedule"),), (), None),
    ((Taint("a", "", "NoExecute"), GPU_TAINT), (Toleration("a", "Exists"),), GPU_TAINT),
    ((GPU_TAINT,), (Toleration("", "Exists"),), None),
])


def test_taint_toleration(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...],
                          blocking: Taint | None) -> None:
    assert tt.untolerated(taints, tolerations) == blocking


def test_tolerations_parse_and_reject_bad_operator() -> None:
    pod = builders.pod("p", tolerations=[{"key": "k", "operator": "Exists",
                                          "effect": "NoSchedule"}])
    assert parse_tolerations(pod) == (Toleration("k", "Exists", "", "NoSchedule"),)
    with pytest.raises(RequestError, match="operator"):
        parse_tolerations(builders.pod("p", tolerations=[{"key": "k", "operator": "Maybe"}]))


# --- NodeAffinity ------------------------------------------------------------------------

LABELS = {"zone": "a", "gpu-gen": "8", "team": "ml"}


def req(key: str, op: str, *values: str) -> Requirement:
    return Requirement(key, op, values)


@pytest.mark.parametrize(("requirement", "matches"), [
    (req("zone", "In", "a", "b"), True),
    (req("zone", "In", "b"), False),
    (req("missing", "In", "a"), False),
    (req("zone", "NotIn", "b"), True),
    (req("zone", "NotIn", "a"), False),
    (req("missing", "NotIn", "a"), True),
    (req("team", "Exists"), True),
    (req("missing", "Exists"), False),
    (req("missing", "DoesNotExist"), True),
    (req("team", "DoesNotExist"), False),
    (req("gpu-gen", "Gt", "7"), True),
    (req("gpu-gen", "Gt", "8"), False),
    (req("gpu-gen", "Lt", "9"), True),
    (req("gpu-gen", "Lt", "8"), False),
    (req("zone", "Gt", "1"), False),  # not an integer label
    (req("missing", "Lt", "100"), False),
])


def test_requirement(requirement: Requirement, matches: bool) -> None:
    assert node_affinity.requirement_matches(requirement,
                                             LABELS.get(requirement.key)) is matches


@pytest.mark.parametrize(("selector", "terms", "matches"), [
    ({}, None, True),
    ({"zone": "a"}, None, True),
    ({"zone": "b"}, None, False),
    ({}, (), False),  # required affinity with no terms selects nothing
    ({}, (SelectorTerm(),), False),  # an empty term selects nothing
    ({}, (SelectorTerm((req("zone", "In", "b"),)), SelectorTerm((req("team", "Exists"),))), True),
    ({}, (SelectorTerm((req("zone", "In", "a"), req("team", "In", "web"))),), False),
    ({"zone": "a"}, (SelectorTerm((req("team", "DoesNotExist"),)),), False),
    ({}, (SelectorTerm(fields=(req("metadata.name", "In", "n1"),)),), True),
    ({}, (SelectorTerm(fields=(req("metadata.name", "NotIn", "n1"),)),), False),
])


def test_affinity_matches(selector: dict[str, str], terms: tuple[SelectorTerm, ...] | None,
                          matches: bool) -> None:
    assert node_affinity.matches(LABELS, "n1", selector, terms) is matches


def test_affinity_parsing() -> None:
    required = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpu-gen", "operator": "Gt", "values": ["7"]}]}]}
    pod = builders.pod("p", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": required}})
    assert parse_required_terms(pod) == (SelectorTerm((req("gpu-gen", "Gt", "7"),)),)
    assert parse_required_terms(builders.pod("p")) is None
    for bad in ({"key": "k", "operator": "Gt", "values": ["x"]},
                {"key": "k", "operator": "In", "values": []},
                {"key": "k", "operator": "Exists", "values": ["a"]},
                {"key": "k", "operator": "Near"}):
        pod = builders.pod("p", affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [bad]}]}}})
        with pytest.raises(RequestError):
            parse_required_terms(pod)


# --- NodeResourcesFit --------------------------------------------------------------------

@pytest.mark.parametrize(("free", "request_", "reasons"), [
    ((1000, 1 << 30, 5), (500, 1 << 29), ()),
    ((1000, 1 << 30, 5), (1000, 1 << 30), ()),
    ((1000, 1 << 30, 5), (1001, 0), (node_resources_fit.CPU,)),
    ((1000, 1 << 30, 5), (0, (1 << 30) + 1), (node_resources_fit.MEMORY,)),
    ((1000, 1 << 30, 0), (0, 0), (node_resources_fit.PODS,)),
    ((-5, -5, 1), (0, 0), ()),  # an overcommitted node still takes a zero request
    ((0, 0, 0), (1, 1), (node_resources_fit.PODS, node_resources_fit.CPU,
                         node_resources_fit.MEMORY)),
])


def test_resources_fit(free: tuple[int, int, int], request_: tuple[int, int],
                       reasons: tuple[str, ...]) -> None:
    assert node_resources_fit.fit(*free, *request_) == reasons


@pytest.mark.parametrize(("containers", "init", "overhead", "expected"), [
    ([builders.container(gpus=None, cpu="500m", memory="1Gi")], [], None, (500, 1 << 30)),
    ([builders.container("a", gpus=None, cpu="1", memory="1Gi"),
      builders.container("b", gpus=None, cpu="250m", memory="512Mi")], [], None,
     (1250, (1 << 30) + (1 << 29))),
    ([builders.container(gpus=None, cpu="1")], [builders.container("i", gpus=None, cpu="2")], None,
     (2000, 0)),
    ([builders.container(gpus=None, cpu="1")], [], {"cpu": "100m", "memory": "10Mi"},
     (1100, 10 << 20)),
    ([{"name": "c", "resources": {"limits": {"cpu": "3", "memory": "1Gi"}}}], [], None,
     (3000, 1 << 30)),
])


def test_pod_requests(containers: list[dict[str, object]], init: list[dict[str, object]],
                      overhead: dict[str, str] | None, expected: tuple[int, int]) -> None:
    extra = {"overhead": overhead} if overhead else {}
    assert pod_requests(builders.pod("p", containers, init_containers=init, **extra)) == expected


# --- summary -----------------------------------------------------------------------------

@pytest.mark.parametrize(("statuses", "pod_status", "text"), [
    ([unschedulable("insufficient GPU memory")] * 7 + [unschedulable("GPU type excluded")] * 5,
     None, "0/12 nodes are available: 7 insufficient GPU memory, 5 GPU type excluded."),
    ([unschedulable("b"), unschedulable("a"), unschedulable("a", "b")], None,
     "0/3 nodes are available: 2 a, 2 b."),
    ([unschedulable("x", "x")], None, "0/1 nodes are available: 1 x."),
    ([unresolvable("node is unschedulable"), unschedulable("insufficient CPU",
                                                            "insufficient memory")], None,
     "0/2 nodes are available: 1 insufficient CPU, 1 insufficient memory, "
     "1 node is unschedulable."),
    ([], None, "no nodes available to schedule pods"),
    ([], unresolvable("pod asks for 9 GPUs."), "no nodes available to schedule pods"),
])


def test_summary(statuses: list[Status], pod_status: Status | None, text: str) -> None:
    diagnosis = Diagnosis(len(statuses), {f"n{i}": s for i, s in enumerate(statuses)},
                          pod_status)
    assert summarize(diagnosis) == text


# --- binder ------------------------------------------------------------------------------

def test_binding_annotations_round_trip() -> None:
    assignment = codecs.Assignment("n1", {"main": (codecs.GrantedDevice("GPU-1", 3000, 30),)})
    out = binder.binding_annotations(assignment, 1_700_000_000.5)
    assert codecs.decode_assignment(out["vgpu.io/assignment"]) == assignment
    assert out["vgpu.io/bind-phase"] == "allocating"
    assert out["vgpu.io/bind-time"] == "2023-11-14T22:13:20.500000Z"
    assert times.parse(out["vgpu.io/bind-time"]).timestamp() == 1_700_000_000.5
    assert binder.binding_annotations(None, 0.0) == {}
