"""The node is the last check: whatever the schedulers did, the agent's Allocate never takes
a GPU past its memory, cores or tasks (issue 36).

A second vGPU scheduler (``extraSchedulerNames``: the webhook admits its pods and the agent
serves them) binds into the node on purpose, as a scheduler that cannot see the first
one's placements would: each of its Bindings fits the GPU alone, together they do not.
The agent serves what fits and refuses the rest (Allocate error, a Warning event on the
pod, a metric); the kubelet then fails that pod, and no container holds a slice the GPU
does not have.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator

import pytest

import vgpu.annotations as ann
from tests.controlplane.cluster import ControlPlane
from tests.e2e.faults.invariant import breaches, devices_of
from tests.e2e.full_stack_support import gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec, allocated
from tests.e2e.harness_pods import namespace_for_test
from tests.e2e.harness_processes import http_get
from vgpu import codecs
from vgpu.cluster.port import Selector

ROGUE = f"rogue-{uuid.uuid4().hex[:6]}"
NODE = NodeSpec("last", (Gpu("Tesla T4", 16000),))


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with FullStack(control_plane, [NODE], config={"extraSchedulerNames": [ROGUE]},
                   agent_metrics=True) as running:
        yield running


def rogue_bind(stack: FullStack, ns: str, name: str, mib: int, cores: int) -> None:
    """Bind as a scheduler that sees nothing else on the GPU would."""
    node = next(iter(stack.nodes))
    pod = stack.pod(ns, name)
    gpu = f"GPU-{node}-0"
    assignment = codecs.Assignment(node=node, containers={
        "main": (codecs.GrantedDevice(gpu, mib, cores),)})
    now = dt.datetime.now(dt.UTC)
    stack.cluster.bind(ns, name, node, {
        ann.ASSIGNMENT: codecs.encode_assignment(assignment),
        ann.BIND_PHASE: ann.PHASE_ALLOCATING,
        ann.BIND_TIME: codecs.encode_heartbeat(now)}, uid=pod["metadata"]["uid"])


def test_two_schedulers_binding_into_one_gpu_cannot_over_commit_it(
        stack: FullStack, request: pytest.FixtureRequest) -> None:
    ns = stack.namespace(namespace_for_test(request.node.name))
    # The stack's own scheduler places one pod first.
    stack.create_pod(ns, gpu_pod("ours", gpu_container(gpu=1, gpumem=6000, gpucores=40)))
    stack.wait_allocated(ns, "ours")
    for name in ("rogue-a", "rogue-b"):
        pod = gpu_pod(name, gpu_container(gpu=1, gpumem=9000, gpucores=50))
        pod["spec"]["schedulerName"] = ROGUE
        stack.create_pod(ns, pod)
        rogue_bind(stack, ns, name, 9000, 50)
    # rogue-a fits beside "ours" (15000 MiB, 90 %); rogue-b does not.
    stack.wait_allocated(ns, "rogue-a")
    failed = stack.wait_pod(ns, "rogue-b", "refused by the node",
                            lambda p: (p.get("status") or {}).get("phase") == "Failed")
    assert not allocated(failed)
    warnings = [e for e in stack.events(ns, "rogue-b")
                if e.get("type") == "Warning" and e.get("reason") == "GPUOvercommitRefused"]
    assert warnings, stack.events(ns, "rogue-b")
    assert "GPU-" in warnings[0]["message"] and "16000" in warnings[0]["message"]
    found = breaches(stack.cluster.list("pods", Selector(namespace=ns)).items,
                     devices_of(stack.cluster.list("nodes").items))
    assert [b for b in found if b.which == "served"] == []
    node = stack.nodes[next(iter(stack.nodes))]
    metrics = http_get(f"http://127.0.0.1:{node.metrics_port}/metrics") or ""
    assert "vgpu_nodeagent_overcommit_refused_total 1.0" in metrics, metrics[-2000:]
    stack.clear(ns, force_after=10)
