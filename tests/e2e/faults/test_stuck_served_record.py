"""One pod's lost served record holds up no other pod's, and is never given up while the
pod lives (issue 50, case 2).

The node agent reaches the API server through the fault proxy, which drops every
``pods/status`` PATCH of pod ``stuck``: its bind phase (``success``) and served record
cannot be written. Pod ``other``, served after it on the same node, must get its record at
once; ``stuck`` stays ``allocating`` meanwhile, its GPU slices counted by the scheduler as
the API server's pods hold them, and past ``nodeagent.phasePendingWarnSeconds`` it gets a
``BindPhasePending`` Warning and counts in the agent's metrics. Once the proxy lets its
write through, the record lands.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.faults.conftest import FaultProxy, start_proxy
from tests.e2e.faults.invariant import breaches, devices_of
from tests.e2e.faults.rules import Action, Fault, Request
from tests.e2e.faults.tally import fresh_tally, scheduler_view
from tests.e2e.full_stack_support import gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec, bind_phase
from tests.e2e.harness_pods import namespace_for_test
from tests.e2e.harness_processes import http_get
from vgpu import served
from vgpu.annotations import PHASE_ALLOCATING
from vgpu.cluster.port import Selector

GPU = Gpu("Tesla T4", 16000)
WARN_AFTER = 5
#: How long ``stuck``'s write is refused: past the bound, and past many retries.
HELD = 20.0


@pytest.fixture(scope="module")
def faulted(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[FullStack, FaultProxy]]:
    proxy, kubeconfig = start_proxy(control_plane, tmp_path_factory.mktemp("records"))
    try:
        with FullStack(control_plane, [NodeSpec("rec", (GPU, GPU))], agent_metrics=True,
                       kubeconfigs={"nodeagent": kubeconfig},
                       config={"nodeagent": {"phasePendingWarnSeconds": WARN_AFTER},
                               "scheduler": {"perGpuMetrics": True}}) as stack:
            yield stack, proxy
    finally:
        proxy.stop()


def stuck_status(namespace: str) -> object:
    path = f"/api/v1/namespaces/{namespace}/pods/stuck/status"

    def rule(request: Request) -> Fault | None:
        return Fault(Action.DROP) if request.method == "PATCH" and request.path == path \
            else None

    return rule


def agent_metric(stack: FullStack, name: str) -> float | None:
    node = next(iter(stack.nodes.values()))
    text = http_get(f"http://127.0.0.1:{node.metrics_port}/metrics") or ""
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def test_a_pods_lost_record_holds_up_no_other_and_lands_when_it_can(
        faulted: tuple[FullStack, FaultProxy], request: pytest.FixtureRequest) -> None:
    stack, proxy = faulted
    ns = stack.namespace(namespace_for_test(request.node.name))
    rule = stuck_status(ns)
    proxy.rules.append(rule)  # type: ignore[arg-type]
    try:
        stack.create_pod(ns, gpu_pod("stuck", gpu_container(gpu=1, gpumem=12000, gpucores=30)))
        def dropped() -> list[object]:
            return [e for e in proxy.faulted(Action.DROP) if "/pods/stuck/" in e.target]

        stack.wait_pod(ns, "stuck", "served, its record dropped", lambda _: len(dropped()) >= 3)
        served_at = time.monotonic()
        # Two GPUs, where stuck has one: never confusable with it, so the scheduler's gate
        # does not hold it back; only the agent's writer could.
        stack.create_pod(ns, gpu_pod("other", gpu_container(gpu=2, gpumem=2000, gpucores=20)))
        other = stack.wait_allocated(ns, "other", timeout=30)
        assert served.served(other) is not None, other["status"]
        pod = stack.pod(ns, "stuck")
        assert bind_phase(pod) == PHASE_ALLOCATING and served.served(pod) is None
        # The scheduler's view of stuck is unchanged: it keeps its room.
        check_accounting(stack, ns)
        warned = stack.wait_pod(ns, "stuck", "warned of its pending record", lambda _: any(
            e.get("reason") == "BindPhasePending" and e.get("type") == "Warning"
            for e in stack.events(ns, "stuck")), timeout=30)
        assert bind_phase(warned) == PHASE_ALLOCATING
        assert agent_metric(stack, "vgpu_nodeagent_phase_writes_overdue") == 1.0
        assert agent_metric(stack, "vgpu_nodeagent_phase_writes_pending") == 1.0
        time.sleep(max(0.0, HELD - (time.monotonic() - served_at)))
    finally:
        proxy.rules.remove(rule)  # type: ignore[arg-type]
    done = stack.wait_allocated(ns, "stuck", timeout=30)
    assert served.served(done) is not None
    assert len(dropped()) >= 8, dropped()
    check_accounting(stack, ns)
    assert agent_metric(stack, "vgpu_nodeagent_phase_writes_pending") == 0.0
    stack.clear(ns, force_after=10)


def check_accounting(stack: FullStack, ns: str) -> None:
    """No GPU over what it has; the scheduler counts what the API server's pods hold (once
    its watch has caught up with them)."""
    deadline = time.monotonic() + 15
    while True:
        pods = stack.cluster.list("pods", Selector(namespace=ns)).items
        devices = devices_of(stack.cluster.list("nodes").items)
        assert not breaches(pods, devices)
        uuids = {u for u in devices if any(u.startswith(f"GPU-{n}-") for n in stack.nodes)}
        text = http_get(f"http://127.0.0.1:{stack.scheduler_metrics_port}/metrics") or ""
        view, tally = scheduler_view(text, uuids), fresh_tally(pods, {stack.scheduler_name},
                                                               uuids)
        if view == tally:
            return
        assert time.monotonic() < deadline, f"the scheduler counts {view}, the pods hold {tally}"
        time.sleep(0.5)
