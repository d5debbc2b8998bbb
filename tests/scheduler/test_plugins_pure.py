"""Table-driven tests of each plugin's pure decision function.

The Kubernetes side: NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit,
the FailedScheduling summary and the binder's annotations. The vGPU plugin's per-GPU fit,
placement and policies are in ``test_vgpu_placement``.
"""

from __future__ import annotations

import pytest

from vgpu import builders, codecs, times
from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu_scheduler.framework.compute import (
    Allocatable,
    Requests,
    is_counted,
    is_extended,
    pod_requests,
)
from vgpu_scheduler.framework.diagnosis import summarize
from vgpu_scheduler.framework.interfaces import Diagnosis
from vgpu_scheduler.framework.objects import (
    Requirement,
    SelectorTerm,
    Taint,
    Toleration,
    parse_required_terms,
    parse_tolerations,
)
from vgpu_scheduler.framework.status import Code, Status, unresolvable, unschedulable
from vgpu_scheduler.plugins.gpu import binder
from vgpu_scheduler.plugins.helper import node_affinity
from vgpu_scheduler.plugins.helper import taints as tt
from vgpu_scheduler.plugins.kube import node_resources_fit, node_unschedulable

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

GI = 1 << 30
FPGA = "example.com/fpga"
NODE = Allocatable(1000, GI, 5, {"ephemeral-storage": 10 * GI, FPGA: 2, "hugepages-2Mi": 0})
IGNORED = node_resources_fit.Ignored(frozenset({"example.com/ignored"}),
                                     frozenset({"ignored.io"}))


def _short(*names: str) -> tuple[str, ...]:
    return tuple(node_resources_fit.insufficient(n) for n in names)


@pytest.mark.parametrize(("used", "pods", "want", "code", "reasons"), [
    (Requests(), 0, Requests(500, GI >> 1), Code.SUCCESS, ()),
    (Requests(), 0, Requests(1000, GI), Code.SUCCESS, ()),
    (Requests(), 0, Requests(1001, 0), Code.UNSCHEDULABLE_AND_UNRESOLVABLE, _short("cpu")),
    (Requests(1), 0, Requests(1000, 0), Code.UNSCHEDULABLE, _short("cpu")),
    (Requests(), 0, Requests(0, GI + 1), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     _short("memory")),
    (Requests(), 5, Requests(), Code.UNSCHEDULABLE, (node_resources_fit.PODS,)),
    # An overcommitted node still takes a zero request (kube-scheduler since 1.28).
    (Requests(2000, 2 * GI, {FPGA: 3}), 0, Requests(0, 0, {"ephemeral-storage": 1}),
     Code.SUCCESS, ()),
    (Requests(900, 0), 5, Requests(200, 2 * GI), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     (node_resources_fit.PODS, *_short("cpu", "memory"))),
    # Every other resource by name, ephemeral storage first, then the others sorted.
    (Requests(0, 0, {FPGA: 1}), 0,
     Requests(0, 0, {"hugepages-2Mi": 2 << 20, FPGA: 2, "ephemeral-storage": 11 * GI}),
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, _short("ephemeral-storage", FPGA, "hugepages-2Mi")),
    (Requests(0, 0, {FPGA: 1}), 0, Requests(0, 0, {FPGA: 1}), Code.SUCCESS, ()),
    (Requests(0, 0, {FPGA: 1}), 0, Requests(0, 0, {FPGA: 2}), Code.UNSCHEDULABLE,
     _short(FPGA)),
    # A resource the node does not list, it has none of.
    (Requests(), 0, Requests(0, 0, {"rdma/hca": 1}), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     _short("rdma/hca")),
    # Ignored: by name or by group, extended resources only.
    (Requests(), 0, Requests(0, 0, {"example.com/ignored": 1, "ignored.io/x": 4}),
     Code.SUCCESS, ()),
    (Requests(), 0, Requests(0, 0, {"hugepages-1Gi": GI}), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     _short("hugepages-1Gi")),
])
def test_resources_fit(used: Requests, pods: int, want: Requests, code: Code,
                       reasons: tuple[str, ...]) -> None:
    status = node_resources_fit.fit(NODE, used, pods, want, IGNORED)
    assert (status.code, status.reasons) == (code, reasons)


def test_ignored_groups_name_extended_resources_only() -> None:
    ignored = node_resources_fit.Ignored(groups=frozenset({"hugepages-2Mi", "example.com"}))
    assert "example.com/fpga" in ignored
    assert "hugepages-2Mi" not in ignored
    assert "kubernetes.io/foo" not in node_resources_fit.Ignored(
        frozenset({"kubernetes.io/foo"}))


@pytest.mark.parametrize(("containers", "init", "overhead", "expected"), [
    ([builders.container(gpus=None, cpu="500m", memory="1Gi")], [], None,
     Requests(500, 1 << 30)),
    ([builders.container("a", gpus=None, cpu="1", memory="1Gi"),
      builders.container("b", gpus=None, cpu="250m", memory="512Mi")], [], None,
     Requests(1250, (1 << 30) + (1 << 29))),
    ([builders.container(gpus=None, cpu="1")], [builders.container("i", gpus=None, cpu="2")],
     None, Requests(2000, 0)),
    ([builders.container(gpus=None, cpu="1")], [], {"cpu": "100m", "memory": "10Mi"},
     Requests(1100, 10 << 20)),
    ([{"name": "c", "resources": {"limits": {"cpu": "3", "memory": "1Gi"}}}], [], None,
     Requests(3000, 1 << 30)),
    # Every counted resource, overhead included; zeros and names kube ignores left out.
    ([{"name": "c", "resources": {"limits": {FPGA: "2", "hugepages-2Mi": "4Mi",
                                             "example.com/zero": "0", "foo": "1"},
                                  "requests": {"ephemeral-storage": "1Gi", "pods": "3"}}}],
     [{"name": "i", "resources": {"limits": {FPGA: "3"}}}],
     {"ephemeral-storage": "100Mi", FPGA: "1"},
     Requests(0, 0, {FPGA: 4, "hugepages-2Mi": 4 << 20,
                     "ephemeral-storage": (1 << 30) + (100 << 20)})),
    # vgpu's own names are never node resources.
    ([builders.container(gpus=2, gpumem=1000, cpu="1")], [], {"vgpu.io/cores": "100"},
     Requests(1000, 0)),
])
def test_pod_requests(containers: list[dict[str, object]], init: list[dict[str, object]],
                      overhead: dict[str, str] | None, expected: Requests) -> None:
    extra = {"overhead": overhead} if overhead else {}
    pod = builders.pod("p", containers, init_containers=init, **extra)
    assert pod_requests(pod, Config().owns_resource) == expected


@pytest.mark.parametrize(("name", "extended", "counted"), [
    ("example.com/fpga", True, True), ("nvidia.com/gpu", True, True),
    ("hugepages-2Mi", False, True), ("ephemeral-storage", False, True),
    ("kubernetes.io/batch", False, True), ("attachable-volumes-csi-x", False, True),
    ("requests.example.com/fpga", False, False), ("foo", False, False),
    ("cpu", False, False), ("Example.com/fpga", False, False),
])
def test_resource_names_as_kube_reads_them(name: str, extended: bool, counted: bool) -> None:
    assert (is_extended(name), is_counted(name)) == (extended, counted)


# --- summary -----------------------------------------------------------------------------

@pytest.mark.parametrize(("statuses", "pod_status", "text"), [
    ([unschedulable("insufficient GPU memory")] * 7 + [unschedulable("GPU type excluded")] * 5,
     None, "0/12 nodes are available: 7 insufficient GPU memory, 5 GPU type excluded."),
    ([unschedulable("b"), unschedulable("a"), unschedulable("a", "b")], None,
     "0/3 nodes are available: 2 a, 2 b."),
    ([unschedulable("x", "x")], None, "0/1 nodes are available: 1 x."),
    ([unresolvable("node is unschedulable"), unschedulable("Insufficient cpu",
                                                            "Insufficient memory")], None,
     "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
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
