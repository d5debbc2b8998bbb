"""A Binding whose answer is lost and that lands late never over-commits a GPU.

The fault proxy closes the scheduler's connection as soon as it has read pod ``a``'s
Binding and sends the Binding to the API server seconds later. The scheduler cannot know
whether the Binding went through; if it gives ``a``'s room back at once, it binds ``b``
there and ``a``'s Binding then lands on top of it (issue 36, case 1).
"""

from __future__ import annotations

import time

from tests.e2e.faults.conftest import FaultEnv
from tests.e2e.faults.rules import Action, Fault, once
from tests.e2e.scheduler_kube_support import bound, check_not_overcommitted, gpu_pod, wait_for
from tests.support.fakeagent import FakeAgents
from vgpu import builders

LATE = 5.0


def test_a_binding_that_lands_late_holds_its_room(env: FaultEnv) -> None:
    kube, namespace, scheduler_name = env.kube, env.namespace, env.scheduler_name
    node = env.nodes(1, memory_mib=16000)
    proxy, kubeconfig = env.proxy()
    proxy.rules.append(once(lambda r: r.is_binding("a"), Fault(Action.LATE, LATE)))
    c = builders.container
    with FakeAgents(kube, namespace):
        sched = env.launch(kubeconfig=kubeconfig)
        sched.wait_ready()
        kube.create("pods", gpu_pod("a", namespace, scheduler_name, c(gpumem=10000)))
        wait_for(lambda: proxy.faulted(Action.LATE), 30, "a's Binding held", sched.log)
        kube.create("pods", gpu_pod("b", namespace, scheduler_name, c(gpumem=10000)))
        wait_for(lambda: "a" in bound(kube, namespace), LATE + 30, "a's late Binding",
                 sched.log)
        # Past the late Binding and b's retries: b never joined a on the GPU.
        time.sleep(3)
        placed = bound(kube, namespace)
    assert placed == {"a": node}, (placed, sched.log.read_text()[-4000:])
    check_not_overcommitted(kube, namespace, [node])
