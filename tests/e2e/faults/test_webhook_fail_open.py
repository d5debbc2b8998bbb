"""Where the mutating webhook fails open (the 1.20 overlay's ``failurePolicy: Ignore``), a
plain ``nvidia.com/gpu: 1`` pod goes to kube-scheduler, which binds it to the GPU node on
allocatable alone (issue 36, case 7). On a real kubelet 1.20 and containerd, beside vgpu's
own pods placed in the same moments, in both creation orders: the node's agent never hands
it a vgpu pod's grant, the kubelet fails it, and no GPU is over-committed among the
containers that run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.e2e.faults.invariant import breaches, devices_of
from tests.e2e.full_stack_support import assignment_of
from tests.e2e.harness import FullStack, wait_until
from tests.e2e.harness_pods import namespace_for_test
from tests.e2e.real_node_support import (
    TWO_A100,
    container_env,
    expected_env,
    real_container,
    real_pod,
    real_stack,
)
from vgpu.cluster.port import Selector

KUBE = "kube-fail-open"


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with real_stack(control_plane, TWO_A100) as running, \
            KubeScheduler(control_plane, scheduler_name=KUBE):
        yield running


def printed(stack: FullStack, ns: str, pod: str) -> dict[str, str] | None:
    try:
        return container_env(stack, ns, pod, "main")
    except Exception:
        return None


@pytest.mark.parametrize("intruder_first", [True, False], ids=["intruder-older",
                                                                 "intruder-newer"])
def test_a_pod_kube_scheduler_binds_to_the_gpu_node_gets_no_grant(
        stack: FullStack, intruder_first: bool) -> None:
    (node,) = stack.nodes
    tag = "older" if intruder_first else "newer"
    ns = stack.namespace(namespace_for_test(f"fail-open-{tag}"))
    unwatched = namespace_for_test(f"fail-open-{tag}-unwatched")
    stack.cp.ensure_namespace(unwatched)
    intruder = real_pod("intruder", real_container("main", gpu=1))
    intruder["spec"].update(schedulerName=KUBE, nodeSelector={"kubernetes.io/hostname": node})
    victim = real_pod("victim", real_container("main", gpu=1, gpumem=3000))
    try:
        if intruder_first:
            stack.create_pod(unwatched, intruder)
            stack.create_pod(ns, victim)
        else:
            stack.create_pod(ns, victim)
            stack.create_pod(unwatched, intruder)
        failed = stack.wait_pod(unwatched, "intruder", "failed by the kubelet",
                                lambda p: p["status"].get("phase") == "Failed", timeout=90)
        assert failed["status"].get("reason") == "UnexpectedAdmissionError", failed["status"]
        pod = stack.wait_allocated(ns, "victim", timeout=90)
        env = wait_until("the victim printed its environment",
                         lambda: printed(stack, ns, "victim"), 30, interval=0.3,
                         context=stack.logs)
        assert expected_env(assignment_of(pod), "main").items() <= env.items()
        pods = [*stack.pods(ns), *stack.pods(unwatched)]
        found = breaches(pods, devices_of(stack.cluster.list("nodes").items))
        assert not found, found
        assert not stack.cluster.list("pods", Selector(namespace=unwatched)).items[0][
            "status"].get("containerStatuses", [{}])[0].get("state", {}).get("running")
    finally:
        stack.clear(ns, force_after=0)
        stack.clear(unwatched, force_after=0)
