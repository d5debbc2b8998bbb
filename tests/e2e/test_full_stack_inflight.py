"""Several GPU pods in flight on one node (the narrowed Permit gate), end to end.

Webhook, scheduler and node agents as processes on a real API server, with the node's
kubelet stand-in paused so that pods stay bound and not yet admitted: two pods on
different GPUs of one node are both bound while neither is allocated, and each is then
allocated its own GPU and limits; two pods the agent could confuse (one GPU, different
limits) are not: the second waits at Permit until the first is allocated. And a burst
of 100 identical pods onto one 8-GPU node is bound and allocated with no pod waiting on
another.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import assignment_of, gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec, bind_phase
from tests.e2e.harness_pods import namespace_for_test
from tests.e2e.harness_processes import http_get
from vgpu.annotations import PHASE_ALLOCATING
from vgpu.cluster.port import Obj
from vgpu.codecs import bind_time
from vgpu.pod_history import ALLOCATION, decode_allocation

V100 = Gpu("Tesla V100-SXM2-32GB", 32768)
NODES = [NodeSpec("duo", (V100, V100), labels={"box": "duo"}),
         NodeSpec("solo", (V100,), labels={"box": "solo"}),
         NodeSpec("octo", (V100,) * 8, labels={"box": "octo"})]


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    # 16 slots a GPU: 100 pods fit on 8 GPUs.
    with FullStack(control_plane, NODES, config={"deviceSplitCount": 16}) as running:
        yield running


@pytest.fixture
def ns(stack: FullStack, request: pytest.FixtureRequest) -> Iterator[str]:
    name = stack.namespace(namespace_for_test(request.node.name))
    yield name
    stack.clear(name)


def on(box: str, name: str, **limits: Any) -> dict[str, Any]:
    pod = gpu_pod(name, gpu_container(gpu=1, **limits))
    pod["spec"]["nodeSelector"] = {"box": box}
    return pod


def node_of(stack: FullStack, box: str) -> str:
    (name,) = [s.name for s in stack.node_specs if s.labels.get("box") == box]
    return name


def bound(pod: Obj) -> bool:
    return bool(pod["spec"].get("nodeName"))


def scheduler_metric(stack: FullStack, series: str) -> float:
    text = http_get(f"http://127.0.0.1:{stack.scheduler_metrics_port}/metrics") or ""
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else -1.0


def gated(stack: FullStack) -> float:
    return scheduler_metric(stack, 'vgpu_scheduler_pending_pods{queue="gated"}')


def test_two_pods_on_different_gpus_of_a_node_are_in_flight_together(stack: FullStack,
                                                                     ns: str) -> None:
    node = node_of(stack, "duo")
    with stack.nodes[node].stand_in.paused():
        stack.create_pod(ns, on("duo", "a", gpumem=3000, gpucores=10))
        stack.create_pod(ns, on("duo", "b", gpumem=5000, gpucores=20))
        pods = [stack.wait_pod(ns, name, "bound", bound) for name in ("a", "b")]
        # Both bound, neither admitted: in flight at once.
        assert [bind_phase(p) for p in pods] == [PHASE_ALLOCATING] * 2
        gpus = [assignment_of(p).containers["main"][0].uuid for p in pods]
        assert len(set(gpus)) == 2
    for name, gpu, mem, cores in (("a", gpus[0], "3000m", "10"), ("b", gpus[1], "5000m", "20")):
        grant = stack.admission(stack.wait_allocated(ns, name)).containers["main"]
        assert grant.envs["NVIDIA_VISIBLE_DEVICES"] == gpu
        assert grant.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == mem
        assert grant.envs["CUDA_DEVICE_SM_LIMIT"] == cores
        assert all(i.startswith(gpu) for i in grant.device_ids)


def test_two_pods_the_agent_could_confuse_are_still_held(stack: FullStack, ns: str) -> None:
    node = node_of(stack, "solo")
    with stack.nodes[node].stand_in.paused():
        stack.create_pod(ns, on("solo", "c", gpumem=3000))
        stack.wait_pod(ns, "c", "bound", bound)
        stack.create_pod(ns, on("solo", "d", gpumem=5000))
        # One GPU, different limits: d waits at Permit behind c, unbound.
        stack.wait_pod(ns, "d", "held at Permit", lambda p: gated(stack) == 1)
        assert not bound(stack.pod(ns, "d"))
    c = stack.wait_allocated(ns, "c")
    d = stack.wait_allocated(ns, "d")
    allocated_c = decode_allocation(c["metadata"]["annotations"][ALLOCATION]).time
    bound_d = bind_time(d["metadata"]["annotations"])
    assert bound_d is not None and bound_d >= allocated_c.timestamp()
    for pod, mem in ((c, "3000m"), (d, "5000m")):
        grant = stack.admission(pod).containers["main"]
        assert grant.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == mem


def test_a_burst_of_identical_pods_onto_one_node_waits_on_nothing(stack: FullStack,
                                                                  ns: str) -> None:
    waits = scheduler_metric(stack, "vgpu_scheduler_permit_waits_total")
    names = [f"p{i:03d}" for i in range(100)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: stack.create_pod(ns, on("octo", n, gpumem=2000, gpucores=5)),
                      names))
    pods = [stack.wait_allocated(ns, name, timeout=120) for name in names]
    assert scheduler_metric(stack, "vgpu_scheduler_permit_waits_total") == waits
    per_gpu: Counter[str] = Counter()
    for pod in pods:
        (granted,) = assignment_of(pod).containers["main"]
        per_gpu[granted.uuid] += 1
        grant = stack.admission(pod).containers["main"]
        # Identical pods are interchangeable, but each still got the GPU it was assigned.
        assert grant.envs["NVIDIA_VISIBLE_DEVICES"] == granted.uuid
        assert all(i.startswith(granted.uuid) for i in grant.device_ids)
        assert grant.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m"
    assert len(per_gpu) == 8 and sum(per_gpu.values()) == 100
