"""A node whose agent died without saying so takes no GPU pod (issue 36, case 6).

After a SIGKILL (an OOM kill, a node-level crash) the agent's heartbeat stays fresh until
it expires, but the kubelet's device manager has already set the node's allocatable
``nvidia.com/gpu`` to 0: a pod bound there now is refused by the kubelet for good
(``UnexpectedAdmissionError``). kube-scheduler keeps such a pod Pending (NodeResourcesFit
on allocatable); so does vgpu, with kube's words, and places it once the agent is back.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import failed_scheduling, gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec, allocated, wait_until
from tests.e2e.harness_pods import namespace_for_test

NODE = NodeSpec("dies", (Gpu("Tesla T4", 15360),))


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with FullStack(control_plane, [NODE]) as running:
        yield running


def test_a_node_whose_agent_died_takes_no_gpu_pod_until_it_is_back(
        stack: FullStack, request: pytest.FixtureRequest) -> None:
    ns = stack.namespace(namespace_for_test(request.node.name))
    (node,) = stack.nodes
    stack.create_pod(ns, gpu_pod("before", gpu_container(gpu=1, gpumem=1000)))
    stack.wait_allocated(ns, "before")

    stack.kill_agent(node)
    wait_until("allocatable 0", lambda: (stack.cluster.get("nodes", node).get("status") or {})
               .get("allocatable", {}).get("nvidia.com/gpu") == "0", 30, context=stack.logs)
    stack.create_pod(ns, gpu_pod("while-dead", gpu_container(gpu=1, gpumem=1000)))
    (message, *_) = wait_until(
        "FailedScheduling", lambda: failed_scheduling(stack, ns, "while-dead"), 30,
        context=stack.logs)
    assert "Insufficient nvidia.com/gpu" in message, message
    assert not stack.pod(ns, "while-dead")["spec"].get("nodeName")

    stack.restart_agent(node)
    placed = stack.wait_allocated(ns, "while-dead", timeout=60)
    assert allocated(placed) and placed["spec"]["nodeName"] == node
    assert stack.pod(ns, "before")["status"].get("phase") != "Failed"
    stack.clear(ns)
