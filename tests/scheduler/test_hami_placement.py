"""HAMi's placement to the last tie, table by table: its GPU score in float32, its order
among equal GPUs (Go's sort, carried from container to container), its node score before
the pod, and GPU choice within a pod's quota (HAMi's objects, vgpu's charge) for every
GPU policy. HAMi's own tables, and the cases built from its code, run in tests/hami/."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

from tests.scheduler.e2e_support import setup
from tests.scheduler.helpers import FakeClock
from vgpu import builders, quota_charge
from vgpu.annotations import ASSIGNMENT, GpuSelector, PodChoices
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import decode_assignment
from vgpu.devices import Device, Usage
from vgpu.hami_fields import parse_gpu_policy
from vgpu.requests import ContainerRequest, PodRequest
from vgpu.topology.links import matrix
from vgpu_scheduler.framework.nodeinfo import NodeInfo, parse_node
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.placement import hami_node, hami_rank, policies
from vgpu_scheduler.placement import place as placement


def gpus(*memories: int, numa: Sequence[int] = ()) -> list[Device]:
    return [Device(f"GPU-{i}", i, "Tesla T4", m, 100, 10, numa[i] if numa else 0)
            for i, m in enumerate(memories)]


def c(name: str = "c", count: int = 1, *, mem: int | None = None, pct: int | None = None,
      cores: int = 0, init: bool = False) -> ContainerRequest:
    return ContainerRequest(name, count, mem, pct, cores, init=init)


def hami(policy: str, *containers: ContainerRequest, numa_bind: bool = False) -> PodRequest:
    return PodRequest(tuple(containers), PodChoices(
        selector=GpuSelector(numa_bind=numa_bind), hami_gpu=parse_gpu_policy(policy)))


def place_hami(policy: str, devices: list[Device], usages: list[Usage],
               *containers: ContainerRequest, budget: placement.Budget | None = None,
               numa_bind: bool = False) -> list[list[int]] | tuple[str, ...]:
    request = hami(policy, *containers, numa_bind=numa_bind)
    rank = hami_rank.HamiRanking(parse_gpu_policy(policy), None, numa_bind).on(devices, 1.0)
    result = placement.place(devices, usages, request, 1.0, rank, budget=budget)
    if isinstance(result, tuple):
        return result
    return [[pos for pos, _, _ in slices] for _, slices in result.containers]


# --- the score, in float32 -----------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "tie"), [
    # (tasks, cores, MiB) with the pod on a 10-slot, 100-core, 10000 MiB GPU: float32 makes
    # these tie and float64 not ...
    ((0, 0, 4500), (0, 5, 4000), True),
    ((0, 0, 4000), (0, 10, 3000), True),
    # ... and these not, where float64 ties them.
    ((0, 0, 5000), (0, 5, 4500), False),
    ((0, 0, 2000), (0, 10, 1000), False),
])
def test_gpus_tie_where_float32_ties_them(a: tuple[int, int, int], b: tuple[int, int, int],
                                          tie: bool) -> None:
    d = gpus(10000)[0]
    score = [hami_rank.score(d, Usage(m, k, t), 500, 0, capacity_mib=10000)
             for t, k, m in (a, b)]
    assert (score[0] == score[1]) is tie


def test_equal_gpus_keep_the_list_order_and_fit_takes_the_last() -> None:
    # Issue 47, case 3: both score 11.0 with the pod placed.
    usages = [Usage(4000, 20, 2), Usage(3000, 40, 1)]
    for policy in ("spread", "binpack", "spread,numa"):
        assert place_hami(policy, gpus(10000, 10000), usages, c(mem=1000, cores=10)) == [[1]]


def test_float32_ties_decide_the_gpu() -> None:
    # Spread takes the lowest score: GPU 0 in float64 (6.0 against 6.000000000000001);
    # in float32 the two tie at 6.0 and Fit takes the last, GPU 1.
    usages = [Usage(4500, 0, 0), Usage(4000, 5, 0)]
    assert place_hami("spread", gpus(10000, 10000), usages, c(mem=500)) == [[1]]


def test_past_twelve_gpus_go_sorts_unstably() -> None:
    # GPUs 3, 4 and 6 hold a task each (binpack prefers them): Go's pdqsort ends the list
    # 3, 6, 4 (tests/scheduler/test_go_sort.py), where a stable sort would end 3, 4, 6.
    usages = [Usage(1000, 10, 1) if i in (3, 4, 6) else Usage() for i in range(13)]
    assert place_hami("binpack", gpus(*[16384] * 13), usages, c(mem=1000, cores=10)) == [[4]]
    assert place_hami("binpack", gpus(*[16384] * 12), usages[:12],
                      c(mem=1000, cores=10)) == [[6]]


def test_each_app_container_sorts_the_list_the_one_before_left() -> None:
    # spread: a takes GPU 2 (all tie); b sorts [2, 0, 1] (GPU 2 now the fullest, the others
    # in the order a's sort left them) and takes GPU 1; c then sorts [2, 1, 0] and takes 0.
    three = gpus(10000, 10000, 10000)
    got = place_hami("spread", three, [Usage()] * 3, *(c(n, mem=1000) for n in "abc"))
    assert got == [[2], [1], [0]]


def test_an_init_container_sorts_the_node_as_it_is() -> None:
    # HAMi gives each init container its own copy of the node: the list in inventory
    # order, whatever the app containers' sorts left. Two idle GPUs, spread: the app takes
    # GPU 1; the init container (larger, so not nested) ties too and takes GPU 1, the
    # app's, first (vgpu's rule: the kubelet hands it on).
    got = place_hami("spread", gpus(10000, 10000), [Usage()] * 2, c("init", mem=3000,
                     init=True), c("app", mem=1000))
    assert got == [[1], [1]]


# --- the node score, before the pod --------------------------------------------------------

def node(name: str, devices: list[Device], usages: list[Usage]) -> NodeInfo:
    static = dataclasses.replace(parse_node(builders.node(name)), devices=tuple(devices))
    return NodeInfo(static, 1.0, gpu_usage={d.uuid: u for d, u in
                                            zip(devices, usages, strict=True)})


@pytest.mark.parametrize(("devices", "usages", "want"), [
    # 10 x (Σ tasks/Σ slots + Σ cores/Σ cores + Σ MiB/Σ MiB), over all GPUs, healthy or not.
    (gpus(16384), [Usage(600, 6, 6)], 10 * (0.6 + 0.06 + 600 / 16384)),
    (gpus(10000, 2000), [Usage(5000, 50, 1), Usage(800, 40, 1)],
     10 * (2 / 20 + 90 / 200 + 5800 / 12000)),
    ([dataclasses.replace(gpus(8000)[0], healthy=False)], [Usage(8000, 100, 10)], 30.0),
    (gpus(16384), [Usage()], 0.0),
    ([], [], 0.0),
])
def test_hami_node_score(devices: list[Device], usages: list[Usage], want: float) -> None:
    assert hami_node.score(node("n", devices, usages)) == pytest.approx(want, rel=1e-6)


def test_the_node_scores_of_many_nodes_are_each_nodes_to_the_bit() -> None:
    infos = [node(f"n{i}", gpus(*[16384 + 1000 * i] * (1 + i % 3)),
                  [Usage(700 * i * k, 3 * i, i % 5) for k in range(1 + i % 3)])
             for i in range(20)]
    snapshot = Snapshot()
    for info in infos:
        snapshot.set(info)
    got = hami_node.scores(snapshot)
    for info in infos:
        assert got[snapshot.positions[info.name]] == hami_node.score(info)
    rows = np.array([3, 7], dtype=np.int64)
    assert list(hami_node.scores(snapshot, rows)) == [got[3], got[7]]


@pytest.mark.parametrize(("name", "prefers"), [("hami-binpack", "a"), ("hami-spread", "b")])
def test_hami_node_policies_score_before_the_pod(name: str, prefers: str) -> None:
    # Issue 47, case 1: a has 6 small tasks, b one large; vgpu's own binpack (the mean of
    # memory and compute with the pod placed) prefers b.
    a = node("a", gpus(16384), [Usage(600, 6, 6)])
    b = node("b", gpus(16384), [Usage(2000, 20, 1)])
    pol = policies.NODE_POLICIES[name]
    p = placement.Placement((), 1000, 10)
    better = a if pol.score(a, p) > pol.score(b, p) else b
    assert better.name == prefers
    assert policies.NODE_POLICIES["binpack"].score(b, p) > \
        policies.NODE_POLICIES["binpack"].score(a, p)


# --- GPU choice within the pod's quota -----------------------------------------------------

def under(mib: int) -> placement.Budget:
    return lambda memory, cores: memory <= mib


@pytest.mark.parametrize(("policy", "want"), [
    (policies.lowest_task_count, [[3]]), (policies.binpack, [[3]]), (policies.spread, [[3]]),
])
def test_a_vgpu_policy_skips_gpus_past_the_budget(policy: placement.GpuRanker,
                                                 want: list[list[int]]) -> None:
    # Issue 47, case 2: a whole GPU on 8000/4000/6000/2000 MiB under a 2000 MiB cap.
    request = PodRequest((c(pct=100),), PodChoices())
    result = placement.place(gpus(8000, 4000, 6000, 2000), [Usage()] * 4, request, 1.0,
                             policy, budget=under(2000))
    assert not isinstance(result, tuple)
    assert [[p for p, _, _ in s] for _, s in result.containers] == want


def test_hami_takes_the_first_gpu_from_the_end_within_the_budget() -> None:
    # binpack with the pod's 50 %: all tie; from the end GPU 3 (1000 MiB) fits the cap.
    assert place_hami("binpack", gpus(8000, 4000, 6000, 2000), [Usage()] * 4, c(pct=50),
                      budget=under(2000)) == [[3]]
    # Under 1500 MiB, a multi-GPU container: each GPU judged with those taken before it.
    assert place_hami("spread", gpus(8000, 4000, 6000, 2000), [Usage()] * 4,
                      c(count=2, pct=25), budget=under(1500)) == [[3, 1]]


def test_nothing_within_the_budget_says_so() -> None:
    assert place_hami("spread", gpus(8000, 4000), [Usage()] * 2, c(pct=100),
                      budget=under(1000)) == (placement.OVER_BUDGET,)


def test_numa_bind_takes_one_numa_node_within_the_budget() -> None:
    # Two GPUs per NUMA node; the first-ranked node's pair would pass the cap together.
    devices = gpus(8000, 8000, 2000, 2000, numa=[0, 0, 1, 1])
    request = PodRequest((c(count=2, pct=50),), PodChoices(selector=GpuSelector(
        numa_bind=True)))
    result = placement.place(devices, [Usage()] * 4, request, 1.0, policies.lowest_task_count,
                             budget=under(2000))
    assert not isinstance(result, tuple)
    assert [p for p, _, _ in result.containers[0][1]] == [2, 3]


def test_the_fastest_linked_set_gives_way_to_the_budget() -> None:
    devices, links = builders.shaped_devices("n", 4, "nvlink-pairs", memory_mib=40960, split=4)
    devices = tuple(dataclasses.replace(d, memory_mib=m) for d, m in
                    zip(devices, (40960, 40960, 8000, 40960), strict=True))
    request = PodRequest((c(count=2, pct=50),), PodChoices())
    m = matrix([d.uuid for d in devices], links)
    result = placement.place(devices, [Usage()] * 4, request, 1.0, policies.lowest_task_count,
                             links=m, budget=under(24480))
    assert not isinstance(result, tuple)
    assert 2 in [p for p, _, _ in result.containers[0][1]]


# --- through the scheduler -----------------------------------------------------------------

def _sized_node(name: str, memories: Sequence[int]) -> dict[str, object]:
    devices = tuple(Device(f"GPU-{name}-{i}", i, "Tesla T4", m) for i, m in
                    enumerate(memories))
    return builders.node(name, devices, heartbeat=FakeClock().now)


def _charged(name: str, mib: int) -> dict[str, object]:
    """A whole-GPU pod carrying the derived requests the webhook wrote for ``mib``."""
    ctr = builders.container()
    charge = quota_charge.Charge(1, mib, 100).resources()
    ctr["resources"]["limits"].update(charge)
    ctr["resources"].setdefault("requests", {}).update(charge)
    return builders.pod(name, [ctr], namespace="team")


def _where(cluster: MemoryCluster, name: str) -> str:
    obj = cluster.get("pods", name, "team")
    raw = obj["metadata"].get("annotations", {}).get(ASSIGNMENT)
    if raw is None:
        return "pending: " + cluster.events(name=name)[-1].message
    return ",".join(s.uuid for sl in decode_assignment(raw).containers.values() for s in sl)


def _quota(cluster: MemoryCluster) -> None:
    cluster.create("resourcequotas", {
        "metadata": {"name": "gpu", "namespace": "team"},
        "spec": {"hard": {"requests.vgpu.io/memory-mib": "100000"}}})


def test_a_gpu_larger_than_the_charge_is_passed_over() -> None:
    # Charged for a 16384 MiB GPU (the largest the webhook knew); an 81920 MiB GPU came
    # later: the pod takes the GPU its charge covers.
    sched, cluster, _ = setup([_sized_node("n", [81920, 16384])])
    _quota(cluster)
    cluster.create("pods", _charged("p", 16384))
    sched.run_until_idle()
    assert _where(cluster, "p") == "GPU-n-1"


def test_only_larger_gpus_leave_a_capped_pod_pending_and_an_uncapped_one_placed() -> None:
    sched, cluster, _ = setup([_sized_node("big", [81920, 81920])])
    cluster.create("pods", _charged("free", 16384))
    sched.run_until_idle()
    assert _where(cluster, "free") == "GPU-big-0"  # no quota caps it: the charge steers only
    _quota(cluster)
    cluster.create("pods", _charged("capped", 16384))
    sched.run_until_idle()
    got = _where(cluster, "capped")
    assert got.startswith("pending: ") and "over the pod's quota charge" in got
    assert "it was charged 16384 MiB" in got


def test_the_hami_quota_steers_the_gpu_through_the_scheduler() -> None:
    sched, cluster, _ = setup([_sized_node("n", [8000, 4000, 6000, 2000])])
    cluster.create("resourcequotas", {"metadata": {"name": "q", "namespace": "team"},
                                      "spec": {"hard": {"limits.nvidia.com/gpumem": "2000"}}})
    cluster.create("pods", builders.pod("p", [builders.container()], namespace="team"))
    sched.run_until_idle()
    assert _where(cluster, "p") == "GPU-n-3"
