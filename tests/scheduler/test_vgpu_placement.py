"""Table-driven tests of the vGPU plugin's pure functions: per-GPU fit and placement.

Which GPUs of a node take a pod's containers (each reason a GPU is refused, GPU and node
policies, NUMA binding, percentages resolved per GPU, memory scaling) and the heartbeat
check. Separate from ``test_plugins_pure``, which covers the Kubernetes plugins.
"""

from __future__ import annotations

import pytest

from vgpu import builders
from vgpu.annotations import GpuSelector, PodChoices
from vgpu.devices import Device, Usage
from vgpu.requests import ContainerRequest, PodRequest
from vgpu_scheduler.placement import place as placement
from vgpu_scheduler.placement import policies
from vgpu_scheduler.plugins.gpu.share import NO_HEARTBEAT, STALE, heartbeat_reason

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
    from vgpu_scheduler.framework.nodeinfo import NodeInfo, parse_node
    empty = NodeInfo(parse_node(builders.node("a", builders.devices("a", 2, memory_mib=1000))), 1.0)
    used = NodeInfo(parse_node(builders.node("b", builders.devices("b", 2, memory_mib=1000))), 1.0,
                    gpu_usage={"GPU-b-0": Usage(1000, 100, 1)})
    p = placement.Placement((), 500, 50)
    binpack, spread = policies.NODE_POLICIES["binpack"], policies.NODE_POLICIES["spread"]
    assert binpack.score(used, p) > binpack.score(empty, p)
    assert spread.score(used, p) < spread.score(empty, p)
    assert binpack.score(empty, p) == pytest.approx(25.0)
