"""The whole stack under random faults, checked after every step (issue 36).

Webhook, scheduler and two nodes' agents (each behind a kubelet stand-in that admits pods
through the agent's GetPreferredAllocation and Allocate) run on the real API server; the
scheduler and the agents reach it through the fault proxy, which drops, delays (past the
scheduler's re-read), sends late, duplicates and resets requests and loses answers at
random, from a seed. Each step creates and deletes GPU pods of random shapes, and now and
then kills an agent (SIGKILL) while pods are in admission and starts it again; after every
step the invariant is read from the API server's objects: no GPU over its memory, cores
or tasks among the pods bound, nor among those served.

``VGPUDEV_FAULT_SEED`` picks the seed (default: a fixed one, so CI is repeatable) and
``VGPUDEV_FAULT_STEPS`` the number of steps (default 12, about a minute; more by hand).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.faults.conftest import FaultProxy, start_proxy
from tests.e2e.faults.invariant import breaches, devices_of
from tests.e2e.faults.rules import MUTATING, Action, RandomFaults
from tests.e2e.full_stack_support import gpu_container, gpu_pod
from tests.e2e.harness import FullStack, Gpu, NodeSpec
from tests.e2e.harness_pods import namespace_for_test
from vgpu.cluster.port import Selector

SEED = int(os.environ.get("VGPUDEV_FAULT_SEED", "3"))
STEPS = int(os.environ.get("VGPUDEV_FAULT_STEPS", "12"))
GPU = Gpu("Tesla T4", 16000)
NODES = [NodeSpec("fa", (GPU, GPU)), NodeSpec("fb", (GPU, GPU))]
RATES = {Action.LATE: 0.06, Action.LOSE_ANSWER: 0.06, Action.DROP: 0.04,
         Action.DUPLICATE: 0.04, Action.RESET: 0.03, Action.DELAY: 0.05}


@pytest.fixture(scope="module")
def faulted(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[FullStack, FaultProxy]]:
    proxy, kubeconfig = start_proxy(control_plane, tmp_path_factory.mktemp("faults"))
    try:
        with FullStack(control_plane, NODES, kubeconfigs={
                "scheduler": kubeconfig, "nodeagent": kubeconfig}) as stack:
            yield stack, proxy
    finally:
        proxy.stop()


def test_no_gpu_is_over_committed_under_random_faults(
        faulted: tuple[FullStack, FaultProxy], request: pytest.FixtureRequest) -> None:
    stack, proxy = faulted
    ns = stack.namespace(namespace_for_test(request.node.name))
    rng = random.Random(SEED)
    # Changes go wrong at the rates above; reads and watches at a tenth of them.
    proxy.rules.append(RandomFaults(SEED, RATES, delay=(0.5, 4.0),
                                    only=lambda r: r.method in MUTATING))
    proxy.rules.append(RandomFaults(SEED + 1, {a: r / 10 for a, r in RATES.items()},
                                    only=lambda r: r.method not in MUTATING))
    created = 0
    history: list[str] = []
    for step in range(STEPS):
        for _ in range(rng.randint(1, 4)):
            shape = gpu_container(gpu=rng.choice((1, 1, 1, 2)),
                                  gpumem=rng.choice((2000, 4000, 6000, 9000, 12000)),
                                  gpucores=rng.choice((0, 10, 30, 50)))
            stack.create_pod(ns, gpu_pod(f"p{created}", shape))
            created += 1
        existing = [p["metadata"]["name"] for p in stack.pods(ns)]
        for name in rng.sample(existing, k=min(len(existing), rng.randint(0, 2))):
            stack.delete_pod(ns, name)
        if step % 4 == 3:
            node = rng.choice(list(stack.nodes))
            history.append(f"step {step}: agent of {node} killed and restarted")
            stack.kill_agent(node)
            time.sleep(rng.uniform(0.5, 2.0))
            stack.restart_agent(node)
        time.sleep(rng.uniform(1.0, 3.0))
        found = breaches(stack.cluster.list("pods", Selector(namespace=ns)).items,
                         devices_of(stack.cluster.list("nodes").items))
        assert not found, (f"seed {SEED}, step {step}:\n" + "\n".join(map(str, found))
                           + f"\nfaults: {proxy.faulted()[-20:]}\n{history}\n{stack.logs()}")
    assert proxy.faulted(), "no fault was injected: the suite proved nothing"
    print(f"seed {SEED}: {STEPS} steps, {created} pods, "
          f"{len(proxy.faulted())} faults injected, {history}")
    proxy.rules.clear()
    stack.clear(ns, timeout=60, force_after=20)
