"""HAMi's GPU and node comparators and scores (pkg/scheduler/policy/gpu_policy_test.go,
pkg/scheduler/policy/node_policy_test.go) through vgpu's HAMi ranking
(:mod:`vgpu_scheduler.placement.hami_rank`) and HAMi node policies
(:mod:`vgpu_scheduler.placement.hami_node`).

HAMi's ``Less(i, j)`` is true when GPU (or node) i sorts before j; its ``Fit`` (and its
node choice) takes from the end, so ``Less(i, j)`` means HAMi prefers j. Rows whose input
vgpu cannot state (a container asking for no GPU, two requests of one container, other
vendors' devices) are left out; where a row mixes such an input in, only the NVIDIA part
is kept, and the row says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.hami.rows import Row
from vgpu import builders
from vgpu.devices import Device, Usage
from vgpu.hami_fields import ScoringWeights, parse_gpu_policy
from vgpu.requests import ContainerRequest
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.nodeinfo import NodeInfo, parse_node
from vgpu_scheduler.placement import hami_node, hami_rank, policies

GPU = "pkg/scheduler/policy/gpu_policy_test.go"
NODE = "pkg/scheduler/policy/node_policy_test.go"


def _gpu(index: int = 0, numa: int = 0, *, split: int = 10, cores: int = 100,
         memory: int = 100) -> Device:
    return Device(f"GPU-{index}", index, "Tesla T4", memory, cores, split, numa)


def gpu_less(policy: str, numa_bind: bool, i: tuple[int, int, int, float],
             j: tuple[int, int, int, float]) -> bool:
    """HAMi's ``DeviceUsageList.Less`` on two GPUs given as (index, NUMA node, tasks,
    score), through vgpu's sort key."""
    key = hami_rank.HamiRanking(parse_gpu_policy(policy), None, numa_bind).key()

    def k(g: tuple[int, int, int, float]) -> tuple[float, ...]:
        return key(_gpu(g[0], g[1]), Usage(tasks=g[2]), g[3])
    return k(i) < k(j)


def gpu_score(gpu: tuple[int, int, int], used: tuple[int, int, int], memory: int,
              cores: int, weights: ScoringWeights | None = None) -> float:
    """HAMi's ``ComputeScore`` for one container's request of ``memory`` MiB and
    ``cores`` on a GPU of (slots, cores, MiB), holding ``used`` (tasks, cores, MiB)."""
    count, total_cores, total_mem = gpu
    d = _gpu(split=count, cores=total_cores, memory=total_mem)
    u = Usage(used[2], used[1], used[0])
    if weights is None:
        return hami_rank.score(d, u, memory, cores, capacity_mib=total_mem)
    return hami_rank.score(d, u, memory, cores, capacity_mib=total_mem, weights=weights)


def first_choice(policy: str, weights: ScoringWeights | None, numa_bind: bool = False,
                 numas: tuple[int, int] = (0, 0)) -> str:
    """TestComputeScoreWithResourceWeights' two GPUs (gpu-a: 1 task, 90 cores, 10 MiB;
    gpu-b: 7 tasks, 10 cores, 20 MiB; 10 slots, 100 cores, 100 MiB each) and its request
    (40 % of the memory, no cores): the GPU HAMi's Fit takes, the last of its sort."""
    devices = [_gpu(0, numas[0]), _gpu(1, numas[1])]
    usages = [Usage(10, 90, 1), Usage(20, 10, 7)]
    request = ContainerRequest("c", 1, None, 40, 0)
    order = hami_rank.HamiRanking(parse_gpu_policy(policy), weights, numa_bind).on(devices, 1)
    order.step(usages, request, carry=True)
    cands = [GpuCandidate(i, d, u, 40, 0, 100) for i, (d, u) in
             enumerate(zip(devices, usages, strict=True))]
    return ("gpu-a", "gpu-b")[order(cands)[0].position]


def _node(name: str, devices: list[Device], usages: list[Usage]) -> NodeInfo:
    static = dataclasses.replace(parse_node(builders.node(name)), devices=tuple(devices))
    return NodeInfo(static, 1.0, gpu_usage={d.uuid: u for d, u in
                                            zip(devices, usages, strict=True)})


def node_score(devices: list[Device], usages: list[Usage]) -> float:
    return hami_node.score(_node("n", devices, usages))


def node_less(policy: str, score_i: int, score_j: int) -> bool:
    """HAMi's ``NodeScoreList.Less`` on two nodes of these HAMi scores, through vgpu's
    node policy of that name (a node of 10 slots, 100 cores and 100 MiB whose tasks, cores
    and MiB make the score)."""
    def info(score: int) -> NodeInfo:
        # score = 10 × (tasks/10 + cores/100 + MiB/100): all slots taken, then the cores.
        return _node("n", [_gpu()], [Usage(0, (score - 10) * 10, 10)])
    name = "hami-spread" if policy == "spread" else "hami-binpack"
    pol = policies.NODE_POLICIES[name]
    placement: Any = None
    return pol.score(info(score_i), placement) < pol.score(info(score_j), placement)


def _rows() -> list[Row]:
    rows: list[Row] = []
    for case, policy, bind, i, j, want in [
        ("Binpack policy with same Numa", "binpack", False, (0, 0, 10, 10), (0, 0, 20, 20),
         True),
        ("Binpack: score primary, lower score sorts first across NUMA", "binpack", False,
         (0, 1, 10, 10), (0, 0, 20, 20), True),
        ("Binpack: score primary, higher score sorts last even on lower NUMA", "binpack",
         False, (0, 0, 10, 10), (0, 1, 20, 20), True),
        ("Binpack: NUMA tiebreaker when scores equal", "binpack", False, (0, 0, 0, 15),
         (0, 1, 0, 15), True),
        ("Binpack: score primary over NUMA, high-NUMA high-score sorts last", "binpack",
         False, (0, 1, 0, 20), (0, 0, 0, 10), False),
        ("Spread: score primary, higher score sorts first", "spread", False, (0, 0, 10, 10),
         (0, 0, 20, 20), False),
        ("Spread: score primary, lower score sorts last across NUMA", "spread", False,
         (0, 1, 10, 10), (0, 0, 20, 20), False),
        ("Spread: score primary over NUMA, high-NUMA high-score sorts first", "spread",
         False, (0, 1, 0, 20), (0, 0, 0, 10), True),
        ("Spread: NUMA tiebreaker when scores equal", "spread", False, (0, 0, 0, 15),
         (0, 1, 0, 15), True),
        ("Binpack+NumaBind: NUMA primary, higher NUMA sorts first regardless of Score",
         "binpack", True, (0, 1, 0, 5), (0, 0, 0, 99), True),
        ("Binpack+NumaBind: same NUMA falls back to lower Score first", "binpack", True,
         (0, 0, 0, 10), (0, 0, 0, 20), True),
        ("Spread+NumaBind: NUMA primary, lower NUMA sorts first regardless of Score",
         "spread", True, (0, 0, 0, 5), (0, 1, 0, 99), True),
        ("Spread+NumaBind: same NUMA falls back to higher Score first", "spread", True,
         (0, 0, 0, 20), (0, 0, 0, 10), True),
        ("Mutex: busy GPU sorts before idle GPU", "mutex", False, (0, 0, 2, 0), (0, 0, 0, 0),
         True),
        ("Mutex: idle GPU sorts after busy GPU", "mutex", False, (0, 0, 0, 0), (0, 0, 1, 0),
         False),
        ("Mutex: NUMA tiebreaker when both idle", "mutex", False, (0, 0, 0, 0), (0, 1, 0, 0),
         True),
        ("Bare numa: NUMA is the sort key regardless of score", "numa", False, (0, 0, 0, 99),
         (0, 1, 0, 5), True),
        ("Bare numa: same NUMA falls to deterministic Index tiebreak", "numa", False,
         (3, 0, 0, 10), (1, 0, 0, 20), False),
        ("Chain binpack,numa: score primary, numa tiebreak when scores equal",
         "binpack,numa", False, (0, 0, 0, 15), (0, 1, 0, 15), True),
        ("Chain spread,numa: score primary, numa tiebreak when scores equal", "spread,numa",
         False, (0, 0, 0, 15), (0, 1, 0, 15), True),
        ("Chain numa,spread: numa primary regardless of score", "numa,spread", False,
         (0, 1, 0, 5), (0, 0, 0, 99), False),
        ("Chain numa,spread: same NUMA falls back to spread (higher score first)",
         "numa,spread", False, (0, 0, 0, 20), (0, 0, 0, 10), True),
        ("Chain mutex,spread: mutex is a Fit() filter, not a sort key; spread decides order",
         "mutex,spread", False, (0, 0, 5, 10), (0, 0, 0, 20), False),
        ("Chain with only filter tokens (mutex,topology-aware) falls back to spread",
         "mutex,topology-aware", False, (0, 0, 0, 10), (0, 0, 0, 20), False),
        ("Chain binpack,numa: deterministic Index tiebreak when score and numa both tie",
         "binpack,numa", False, (5, 0, 0, 10), (2, 0, 0, 10), False),
        ("Chain binpack,spread + NumaBind: numa forced primary to keep groups contiguous",
         "binpack,spread", True, (0, 0, 0, 99), (0, 1, 0, 5), True),
        ("Chain spread,numa + NumaBind: numa moved to front, spread breaks same-NUMA ties",
         "spread,numa", True, (0, 0, 0, 20), (0, 0, 0, 10), True),
    ]:
        rows.append(Row(f"{GPU}: TestDeviceUsageList_Less/{case}",
                        lambda p=policy, b=bind, i=i, j=j: gpu_less(p, b, i, j), want))
    for case, args, want in [
        ("Zero capacity device returns score 0 without panic", ((0, 0, 0), (0, 0, 0), 0, 0),
         0.0),
        ("Partial zero capacity (Count=0) returns score 0 without panic",
         ((0, 8, 4096), (0, 0, 0), 0, 0), 0.0),
        # The row's second request is another vendor's device type; HAMi leaves it out.
        ("Filter other device types and ignore Nums for slots (NVIDIA part)",
         ((10, 4, 8192), (2, 1, 2048), 1024, 1), 11.75),
        ("MemPercentagereq calculation evaluates correctly (50 % of 10000)",
         ((10, 10, 10000), (0, 0, 0), 5000, 2), 8.0),
    ]:
        rows.append(Row(f"{GPU}: TestComputeScore/{case}",
                        lambda a=args: gpu_score(*a), want))
    weighted = f"{GPU}: TestComputeScoreWithResourceWeights"
    mem3, core3 = ScoringWeights(1, 1, 3), ScoringWeights(1, 3, 1)
    for case, args, want in [
        ("default weights preserve current score: gpu-a", ((10, 100, 100), (1, 90, 10), 40, 0),
         16.0),
        ("default weights preserve current score: gpu-b", ((10, 100, 100), (7, 10, 20), 40, 0),
         15.0),
        ("memory weight changes the device preference: gpu-a",
         ((10, 100, 100), (1, 90, 10), 40, 0, mem3), 26.0),
        ("memory weight changes the device preference: gpu-b",
         ((10, 100, 100), (7, 10, 20), 40, 0, mem3), 27.0),
        ("core weight can independently change the device preference: gpu-a",
         ((10, 100, 100), (1, 90, 10), 40, 0, core3), 34.0),
        ("core weight can independently change the device preference: gpu-b",
         ((10, 100, 100), (7, 10, 20), 40, 0, core3), 17.0),
    ]:
        rows.append(Row(f"{weighted}/{case}", lambda a=args: gpu_score(*a), want))
    for case, args, want in [
        ("memory weight changes the device preference: binpack takes", ("binpack", mem3),
         "gpu-b"),
        ("memory weight changes the device preference: spread takes", ("spread", mem3),
         "gpu-a"),
        ("core weight can independently change the device preference: binpack takes",
         ("binpack", core3), "gpu-a"),
        ("NUMA ordering remains independent from weighted score",
         ("binpack", mem3, True, (0, 1)), "gpu-a"),
    ]:
        rows.append(Row(f"{weighted}/{case}", lambda a=args: first_choice(*a), want))
    for case, policy, i, j, want in [
        ("Spread strategy, i score higher", "spread", 20, 10, True),
        ("Spread strategy,j score higher", "spread", 10, 20, False),
        ("Default strategy (Binpack), i score lower", "binpack", 10, 20, True),
        ("Default strategy (Binpack), j score lower", "binpack", 20, 10, False),
    ]:
        rows.append(Row(f"{NODE}: TestLess/{case}",
                        lambda p=policy, i=i, j=j: node_less(p, i, j), want))
    two = ([Device("a", 0, "T4", 100, 100, 100), Device("b", 1, "T4", 200, 200, 150)],
           [Usage(100, 100, 50), Usage(200, 200, 75)])
    for case, (devices, usages), want in [
        ("Zero capacity devices returns score 0 without panic",
         ([Device("z", 0, "T4", 0, 0, 0)], [Usage()]), 0.0),
        ("Empty device list returns score 0 without panic", ([], []), 0.0),
        ("Test with no devices", two, 25.0),
        ("Test with devices", two, 25.0),
    ]:
        rows.append(Row(f"{NODE}: TestComputeDefaultScore/{case}",
                        lambda d=devices, u=usages: node_score(d, u), want))
    return rows


ROWS = _rows()
