"""The Allocate-steal case of issue 24 on a real node: the kubelet v1.20.2 and containerd.

A GPU pod created on the node with another scheduler's name (admission out of the way: a
namespace the stack's webhook does not watch, as under the 1.20 overlay's failurePolicy
Ignore while the webhook is down) is admitted by the real kubelet, which calls the agent's
GetPreferredAllocation and Allocate for it. The agent used to wait for the next vgpu
binding and hand it that pod's grant. Now it refuses (the kubelet fails the pod with the
agent's message) and the vgpu pod bound right after runs with its own grant, as its
container's environment shows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import assignment_of
from tests.e2e.harness import FullStack, bind_phase, wait_until
from tests.e2e.harness_pods import namespace_for_test
from tests.e2e.real_node_support import (
    TWO_A100,
    agent_metrics,
    container_env,
    expected_env,
    real_container,
    real_pod,
    real_stack,
)
from vgpu.annotations import PHASE_SUCCESS

NODE = TWO_A100


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with real_stack(control_plane, NODE) as running:
        yield running


def test_an_intruder_is_refused_by_the_agent_and_the_vgpu_pod_gets_its_grant(
        stack: FullStack) -> None:
    (node,) = stack.nodes
    ns = stack.namespace(namespace_for_test("real-tenant"))
    unwatched = namespace_for_test("real-tenant-unwatched")
    stack.cp.ensure_namespace(unwatched)
    try:
        intruder = real_pod("intruder", real_container("main", gpu=1))
        intruder["spec"].update(nodeName=node, schedulerName="x")
        stack.create_pod(unwatched, intruder)
        stack.create_pod(ns, real_pod("victim", real_container("main", gpu=1, gpumem=3000)))

        failed = stack.wait_pod(unwatched, "intruder", "failed by the kubelet",
                                lambda p: p["status"].get("phase") == "Failed", timeout=60)
        message = failed["status"].get("message", "")
        assert failed["status"].get("reason") == "UnexpectedAdmissionError", failed["status"]
        assert "PermissionDenied" in message and "no vgpu scheduler placed it" in message

        pod = stack.wait_allocated(ns, "victim", timeout=60)
        assert bind_phase(pod) == PHASE_SUCCESS
        assignment = assignment_of(pod)

        def printed() -> dict[str, str] | None:
            try:
                return container_env(stack, ns, "victim", "main")
            except Exception:
                return None

        env = wait_until("the victim printed its environment", printed, 30, interval=0.3,
                         context=stack.logs)
        assert expected_env(assignment, "main").items() <= env.items()
        assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"

        reasons = [e.get("reason") for e in stack.events(unwatched, "intruder")]
        assert "AllocateRefused" in reasons, reasons
        refused = agent_metrics(stack, node).get(("vgpu_nodeagent_allocate_refused_total", ()))
        assert refused == 1, refused
    finally:
        stack.clear(ns, force_after=0)
        stack.clear(unwatched, force_after=0)
