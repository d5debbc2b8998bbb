"""Table-driven tests of each plugin's pure decision function."""

from __future__ import annotations

import pytest

from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.objects import (
    Requirement,
    SelectorTerm,
    Taint,
    Toleration,
    parse_required_terms,
    parse_tolerations,
    pod_requests,
)
from scheduler.framework.status import Status, unresolvable, unschedulable
from scheduler.host.summary import summarize
from scheduler.placement import place as placement
from scheduler.placement import policies
from scheduler.plugins import binder, node_affinity, node_resources_fit, node_unschedulable
from scheduler.plugins import taint_toleration as tt
from scheduler.plugins.vgpu import NO_HEARTBEAT, STALE, heartbeat_reason
from vgpu import builders, codecs
from vgpu.annotations import GpuSelector, PodChoices
from vgpu.devices import Device, Usage
from vgpu.errors import RequestError
from vgpu.requests import ContainerRequest, PodRequest

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


# --- vGPU: per-GPU fit and placement -----------------------------------------------------

def gpu(i: int, *, memory: int = 16384, numa: int = 0, model: str = "Tesla T4",
        healthy: bool = True, split: int = 4) -> Device:
    return Device(f"GPU-{i}", i, model, memory, 100, split, numa, healthy)


def creq(count: int = 1, mem: int | None = None, pct: int | None = None, cores: int = 0,
         name: str = "c") -> ContainerRequest:
    if mem is None and pct is None:
        pct = 100
    return ContainerRequest(name, count, mem, pct, cores)


def pod_request(*containers: ContainerRequest, selector: GpuSelector | None = None,
                ) -> PodRequest:
    return PodRequest(tuple(containers), PodChoices(selector=selector or GpuSelector()))


FREE = Usage()


@pytest.mark.parametrize(("devices", "usages", "request_", "selector", "reasons"), [
    ([gpu(0)], [FREE], creq(mem=16384), GpuSelector(), ()),
    ([gpu(0)], [Usage(1, 0, 1)], creq(mem=16384), GpuSelector(), ("insufficient GPU memory",)),
    ([gpu(0)], [Usage(0, 0, 4)], creq(mem=1), GpuSelector(), ("no free GPU slots",)),
    ([gpu(0)], [Usage(100, 10, 1)], creq(mem=1, cores=100), GpuSelector(),
     ("GPU busy, exclusive use requested",)),
    ([gpu(0)], [Usage(100, 100, 1)], creq(mem=1), GpuSelector(),
     ("GPU compute fully claimed",)),
    ([gpu(0)], [Usage(100, 60, 1)], creq(mem=1, cores=50), GpuSelector(),
     ("insufficient GPU cores",)),
    ([gpu(0, healthy=False)], [FREE], creq(mem=1), GpuSelector(), ("GPU unhealthy",)),
    ([gpu(0)], [FREE], creq(mem=1), GpuSelector(use_types=("A100",)), ("GPU type excluded",)),
    ([gpu(0)], [FREE], creq(mem=1), GpuSelector(nouse_types=("t4",)), ("GPU type excluded",)),
    ([gpu(0)], [FREE], creq(mem=1), GpuSelector(use_uuids=("GPU-9",)), ("GPU UUID excluded",)),
    ([gpu(0), gpu(1)], [FREE, FREE], creq(count=3, mem=1), GpuSelector(),
     (placement.TOO_FEW_GPUS,)),
    ([gpu(0), gpu(1)], [Usage(16000, 0, 1), FREE], creq(count=2, mem=1000), GpuSelector(),
     ("insufficient GPU memory",)),
    ([gpu(0), gpu(1, model="A100")], [FREE, FREE], creq(mem=1), GpuSelector(use_types=("A100",)),
     ()),
    # percentages resolve against each GPU: 50 % of 16 GiB fits beside 8 GiB used
    ([gpu(0)], [Usage(8192, 0, 1)], creq(pct=50), GpuSelector(), ()),
    ([gpu(0)], [Usage(8193, 0, 1)], creq(pct=50), GpuSelector(), ("insufficient GPU memory",)),
])
def test_fits(devices: list[Device], usages: list[Usage], request_: ContainerRequest,
              selector: GpuSelector, reasons: tuple[str, ...]) -> None:
    assert placement.fits(devices, usages, request_, selector, 1.0) == reasons
    result = placement.place(devices, usages, pod_request(request_, selector=selector), 1.0,
                             policies.lowest_task_count)
    if reasons:
        assert result == reasons
    else:
        assert isinstance(result, placement.Placement)


def chosen(result: placement.Placement | tuple[str, ...]) -> dict[str, list[int]]:
    assert isinstance(result, placement.Placement), result
    return {name: [pos for pos, _, _ in gpus] for name, gpus in result.containers}


@pytest.mark.parametrize(("policy", "usages", "expected"), [
    ("lowest-task-count", [Usage(1000, 10, 2), Usage(8000, 50, 1), FREE], [2]),
    ("lowest-task-count", [Usage(1000, 10, 2), Usage(8000, 50, 1), Usage(1, 1, 1)], [1]),
    ("binpack", [Usage(1000, 10, 2), Usage(8000, 50, 1), FREE], [1]),
    ("spread", [Usage(1000, 10, 2), Usage(8000, 50, 1), Usage(500, 5, 1)], [2]),
])
def test_gpu_policies(policy: str, usages: list[Usage], expected: list[int]) -> None:
    devices = [gpu(i) for i in range(3)]
    result = placement.place(devices, usages, pod_request(creq(mem=1000, cores=10)), 1.0,
                             policies.GPU_POLICIES[policy])
    assert chosen(result) == {"c": expected}


@pytest.mark.parametrize(("policy", "scaling", "expected"), [
    # GPU 0 has 80 % of its physical memory and no compute claimed; GPU 1 has no memory
    # and 60 % of its compute. Measured against physical memory GPU 0 is fuller (0.4 vs
    # 0.3); with memory scaled 2x it holds 40 % of what can be handed out, and GPU 1 is
    # the fuller one (0.3 vs 0.2). Binpack and spread measure against scaled memory.
    ("binpack", 1.0, [0]),
    ("binpack", 2.0, [1]),
    ("spread", 1.0, [1]),
    ("spread", 2.0, [0]),
])
def test_binpack_and_spread_measure_memory_against_scaled_capacity(
        policy: str, scaling: float, expected: list[int]) -> None:
    devices = [gpu(0), gpu(1)]
    usages = [Usage(16384 * 8 // 10, 0, 1), Usage(0, 60, 1)]
    result = placement.place(devices, usages, pod_request(creq(mem=100, cores=10)), scaling,
                             policies.GPU_POLICIES[policy])
    assert chosen(result) == {"c": expected}


def test_multi_gpu_container_uses_distinct_gpus_and_containers_see_each_other() -> None:
    devices = [gpu(i) for i in range(3)]
    request = pod_request(creq(count=2, mem=10000, name="a"), creq(count=2, mem=10000, name="b"))
    # 3 GPUs of 16 GiB: a takes two, b cannot take those two again (6 GiB left each) ...
    assert placement.place(devices, [FREE] * 3, request, 1.0,
                           policies.lowest_task_count) == ("insufficient GPU memory",)
    request = pod_request(creq(count=2, mem=8000, name="a"), creq(count=2, mem=8000, name="b"))
    result = chosen(placement.place(devices, [FREE] * 3, request, 1.0, policies.lowest_task_count))
    assert len(set(result["a"])) == 2 and len(set(result["b"])) == 2
    # b prefers the GPU a left empty (lowest task count)
    assert 2 in result["b"]


def test_numa_bind_keeps_a_container_on_one_numa_node() -> None:
    devices = [gpu(0, numa=0), gpu(1, numa=1), gpu(2, numa=1), gpu(3, numa=0)]
    usages = [Usage(16000, 0, 1), FREE, FREE, FREE]
    bound = GpuSelector(numa_bind=True)
    result = chosen(placement.place(devices, usages,
                                    pod_request(creq(count=2, mem=4000), selector=bound),
                                    1.0, policies.lowest_task_count))
    assert result == {"c": [1, 2]}
    # three fitting GPUs, but at most two on any NUMA node
    assert placement.place(devices, [FREE] * 4,
                           pod_request(creq(count=3, mem=1), selector=bound), 1.0,
                           policies.lowest_task_count) == (placement.NUMA_SPLIT,)
    unbound = placement.place(devices, [FREE] * 4, pod_request(creq(count=3, mem=1)), 1.0,
                              policies.lowest_task_count)
    assert isinstance(unbound, placement.Placement)


def test_percentage_resolves_per_gpu_in_assignment() -> None:
    devices = [gpu(0, memory=16384), gpu(1, memory=32768)]
    result = placement.place(devices, [FREE, FREE], pod_request(creq(count=2, pct=25)), 1.0,
                             policies.lowest_task_count)
    assert isinstance(result, placement.Placement)
    assignment = result.assignment("n", devices)
    assert [g.memory_mib for g in assignment.containers["c"]] == [4096, 8192]


def test_memory_scaling_oversubscribes() -> None:
    devices = [gpu(0, memory=10000)]
    assert placement.fits(devices, [Usage(10000, 0, 1)], creq(mem=5000), GpuSelector(), 1.5) == ()
    assert placement.fits(devices, [Usage(10001, 0, 1)], creq(mem=5000), GpuSelector(),
                          1.5) == ("insufficient GPU memory",)


@pytest.mark.parametrize(("heartbeat", "now", "reason"), [
    (100.0, 150.0, None),
    (100.0, 280.0, None),
    (100.0, 280.5, STALE),
    (None, 0.0, NO_HEARTBEAT),
])
def test_heartbeat(heartbeat: float | None, now: float, reason: str | None) -> None:
    assert heartbeat_reason(heartbeat, now, 180.0) == reason


# --- node policies -----------------------------------------------------------------------

def test_node_policies_rank_opposite_ways() -> None:
    from scheduler.framework.nodeinfo import NodeInfo, parse_node
    empty = NodeInfo(parse_node(builders.node("a", builders.devices("a", 2, memory_mib=1000))), 1.0)
    used = NodeInfo(parse_node(builders.node("b", builders.devices("b", 2, memory_mib=1000))), 1.0,
                    gpu_usage={"GPU-b-0": Usage(1000, 100, 1)})
    p = placement.Placement((), 500, 50)
    binpack, spread = policies.NODE_POLICIES["binpack"], policies.NODE_POLICIES["spread"]
    assert binpack.score(used, p) > binpack.score(empty, p)
    assert spread.score(used, p) < spread.score(empty, p)
    assert binpack.score(empty, p) == pytest.approx(25.0)


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
    ([], None, "0/0 nodes are available."),
    ([], unresolvable("pod asks for 9 GPUs."), "0/0 nodes are available: pod asks for 9 GPUs."),
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
    assert codecs.decode_time(out["vgpu.io/bind-time"]).timestamp() == 1_700_000_000.5
    assert binder.binding_annotations(None, 0.0) == {}
