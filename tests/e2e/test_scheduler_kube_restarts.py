"""`vgpu scheduler` restarted on a real kube-apiserver: nothing bound twice, gates kept.

A SIGKILL in the middle of a burst of 300 pods, then a new process: every pod bound
once, no GPU overcommitted, no two pods the node agent could confuse in flight on a node
at once. And a restarted
scheduler keeps in-flight pods gating their node, from the bind-time it reads back. The
setting (one scheduler name and labelled nodes per test) is the one of
``test_scheduler_kube``.
"""

from __future__ import annotations

import concurrent.futures
import random
import signal
import time
from typing import Any

import vgpu.annotations as ann
from tests.e2e.scheduler_kube_support import (
    History,
    bound,
    check_not_overcommitted,
    gpu_pod,
    pods_of,
    wait_for,
)
from tests.support.fakeagent import FakeAgents
from vgpu import builders, times
from vgpu.kube import adapter

# --- restarts ----------------------------------------------------------------------------

def test_sigkill_mid_burst_then_restart_binds_every_pod_once_without_overcommit(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    names = [nodes(4, memory_mib=40960) for _ in range(30)]
    rng = random.Random(5)
    c = builders.container
    pods = [gpu_pod(f"p-{i:03d}", namespace, scheduler_name,
                    c(gpus=rng.choice((1, 1, 1, 2)), gpumem=rng.randrange(2000, 9000, 500),
                      cores=rng.choice((0, 10, 20, 30))))
            for i in range(300)]
    with FakeAgents(kube, namespace, workers=8), History(kube, namespace) as history:
        first = launch(tag="first")
        first.wait_ready()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: kube.create("pods", p), pods))
            wait_for(lambda: len(bound(kube, namespace)) >= 60, 60, "a first share bound",
                     first.log)
            assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        at_kill = len(bound(kube, namespace))
        assert at_kill < len(pods), "the burst was over before the kill; nothing was tested"
        second = launch(tag="second")
        wait_for(lambda: len(bound(kube, namespace)) == len(pods), 120, "every pod bound",
                 second.log)
    bindings = history.bindings()
    assert sorted(bindings) == sorted(p["metadata"]["name"] for p in pods)
    twice = {name: seen for name, seen in bindings.items() if len(seen) != 1}
    assert not twice, f"pods seen bound more than one way: {twice}"
    check_not_overcommitted(kube, namespace, names)
    assert history.confusable_in_flight() == []
    assert second.stop() == 0


def test_a_restarted_scheduler_keeps_in_flight_pods_gating_their_node(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    # One GPU and three different sizes: each pod confusable with the one before.
    node = nodes(1, memory_mib=16384)
    c = builders.container
    # Long enough that the restarted process still finds the gate closed: the next pod
    # must arrive while the in-flight one holds it. Starting takes seconds, and on a busy
    # machine (a CPU hog on one core and other work) 12 s and more: with 15 s here the
    # gate had opened before the new process was up in 3 of 10 runs (issue 46).
    timeout = 45.0
    config = {"scheduler": {"permitTimeoutSeconds": timeout}}

    def bind_time(name: str) -> float:
        meta = pods_of(kube, namespace)[name]["metadata"]["annotations"]
        return times.parse(meta[ann.BIND_TIME], ann.BIND_TIME).timestamp()

    with FakeAgents(kube, namespace, enabled=False) as agents:
        first = launch(config=config, tag="first")
        first.wait_ready()
        kube.create("pods", gpu_pod("in-flight", namespace, scheduler_name, c(gpumem=1000)))
        wait_for(lambda: "in-flight" in bound(kube, namespace), 20, "first pod bound",
                 first.log)
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        time.sleep(3)  # so that a gate clock restarted by the new process would show
        second = launch(config=config, tag="second")
        second.wait_ready()
        restarted = time.time()
        kube.create("pods", gpu_pod("next", namespace, scheduler_name, c(gpumem=2000)))
        wait_for(lambda: second.metric("vgpu_scheduler_pending_pods", queue="gated") == 1, 20,
                 "the next pod held at its node's gate", second.log)
        # No agent answers: the gate opens permitTimeoutSeconds after the in-flight pod's
        # bind-time, which the restarted scheduler read from the pod.
        wait_for(lambda: "next" in bound(kube, namespace), timeout + 30, "next pod bound",
                 second.log)
        assert bind_time("next") >= bind_time("in-flight") + timeout - 0.05
        assert bind_time("next") < restarted + timeout - 2

        # The agent's answer opens the gate long before the timeout.
        kube.create("pods", gpu_pod("after", namespace, scheduler_name, c(gpumem=3000)))
        wait_for(lambda: second.metric("vgpu_scheduler_pending_pods", queue="gated") == 1, 20,
                 "the pod after held at the gate", second.log)
        agents.enable()
        wait_for(lambda: "after" in bound(kube, namespace), 20, "pod after bound", second.log)
        assert bind_time("after") < bind_time("next") + timeout - 1
    assert bound(kube, namespace) == {"in-flight": node, "next": node, "after": node}
    assert second.stop() == 0
