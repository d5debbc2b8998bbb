"""HAMi's placement end to end: webhook, scheduler and node agents as processes on the real
API server (issue 47). Pods written for HAMi land where HAMi would put them.

One node, ``mixed``, with four GPUs of 8000, 4000, 6000 and 2000 MiB in that order, and
``pair``, two 10000 MiB GPUs. Each test has its own namespace.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import assignment_of, gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec, wait_until
from tests.e2e.harness_pods import namespace_for_test

NODES = [NodeSpec("mixed", tuple(Gpu("Tesla T4", m) for m in (8000, 4000, 6000, 2000))),
         NodeSpec("pair", (Gpu("Tesla V100", 10000),) * 2)]


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with FullStack(control_plane, NODES) as running:
        yield running


@pytest.fixture
def ns(stack: FullStack, request: pytest.FixtureRequest) -> Iterator[str]:
    name = stack.namespace(namespace_for_test(request.node.name))
    yield name
    stack.clear(name)


def gpus_of(stack: FullStack, ns: str, name: str) -> list[str]:
    """``<node>/<GPU index>`` of each GPU the pod got, the node by its spec's name."""
    pod = stack.wait_allocated(ns, name)
    node = stack.nodes[pod["spec"]["nodeName"]].spec
    return [f"{node.name.split('-')[0]}/{node.uuids().index(g.uuid)}"
            for slices in assignment_of(pod).containers.values() for g in slices]


def test_a_whole_gpu_goes_to_the_gpu_the_hami_quota_takes(stack: FullStack, ns: str) -> None:
    stack.create(f"/api/v1/namespaces/{ns}/resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "hami"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "2000"}}})
    wait_until("the scheduler sees the quota", lambda: stack.cluster.get(
        "resourcequotas", "hami", ns), 10)
    stack.create_pod(ns, gpu_pod("whole", gpu_container(gpu=1), annotations={
        "nvidia.com/use-gputype": "T4"}))
    assert gpus_of(stack, ns, "whole") == ["mixed/3"]


def test_equal_gpus_go_to_the_last_as_hamis_fit_takes_them(stack: FullStack, ns: str) -> None:
    # Both GPUs of ``pair`` idle, the pod's score on each the same: HAMi's sort keeps them
    # in order and its Fit starts from the end.
    stack.create_pod(ns, gpu_pod("tie", gpu_container(gpu=1, gpumem=1000), annotations={
        "hami.io/gpu-scheduler-policy": "spread", "nvidia.com/use-gputype": "V100"}))
    assert gpus_of(stack, ns, "tie") == ["pair/1"]
