"""Preemption by `vgpu scheduler` on a real kube-apiserver (v1.20).

A GPU node (a plain Node object with an inventory written by the test), a low-priority
pod bound on its only GPU, then a high-priority pod asking for the whole GPU. There is no
kubelet: an eviction leaves the victim terminating (``deletionTimestamp`` set) until the
test, acting as the kubelet, deletes it for good; :class:`FakeAgents` plays the node
agent. Priorities come from PriorityClasses (1.20's Priority admission refuses a bare
``spec.priority``); PodDisruptionBudgets are ``policy/v1beta1`` there, and apply only to
running, ready pods, so the victims are given that status.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.scheduler_kube_support import (
    bound,
    check_not_overcommitted,
    delete_now,
    events_of,
    gpu_pod,
    pods_of,
    priority_classes,
    wait_for,
)
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.errors import NotFoundError
from vgpu.kube import adapter

WHOLE = builders.container(percent=100)
@pytest.fixture
def priority(kube: adapter.KubeCluster) -> Iterator[Callable[[int], str]]:
    """``priority(value)``: a PriorityClass of that value, deleted after the test."""
    yield from priority_classes(kube, "e2e")


def pod(name: str, namespace: str, scheduler_name: str, priority_class: str,
        **labels: str) -> Obj:
    obj = gpu_pod(name, namespace, scheduler_name, WHOLE)
    obj["spec"]["priorityClassName"] = priority_class
    obj["metadata"]["labels"] = labels
    return obj


def running(kube: adapter.KubeCluster, namespace: str, name: str) -> None:
    """What the kubelet reports once the containers run."""
    kube.patch_status("pods", name, {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}, namespace)


def terminating(kube: adapter.KubeCluster, namespace: str, name: str) -> bool:
    return bool(pods_of(kube, namespace)[name]["metadata"].get("deletionTimestamp"))


def nominated(kube: adapter.KubeCluster, namespace: str, name: str) -> str | None:
    found: str | None = pods_of(kube, namespace)[name].get("status", {}).get(
        "nominatedNodeName")
    return found


def budget(kube: adapter.KubeCluster, namespace: str, allowed: int) -> None:
    """A PodDisruptionBudget over ``app: db`` allowing ``allowed`` disruptions (no
    disruption controller runs here: the status is written by hand)."""
    base = f"/apis/policy/v1beta1/namespaces/{namespace}/poddisruptionbudgets"
    try:
        current = kube.request_json("GET", f"{base}/db", "get pdb")
    except NotFoundError:
        kube.request_json("POST", base, "create pdb", body={
            "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
        current = kube.request_json("GET", f"{base}/db", "get pdb")
    current["status"] = {"disruptionsAllowed": allowed, "currentHealthy": 1,
                         "desiredHealthy": 1 - allowed, "expectedPods": 1,
                         "observedGeneration": current["metadata"].get("generation", 1)}
    kube.request_json("PUT", f"{base}/db/status", "pdb status", body=current)


def start_low(kube: adapter.KubeCluster, namespace: str, scheduler_name: str,
              low_class: str, sched: Any, **labels: str) -> None:
    kube.create("pods", pod("low", namespace, scheduler_name, low_class, **labels))
    wait_for(lambda: "low" in bound(kube, namespace), 20, "low bound", sched.log)
    running(kube, namespace, "low")


def test_a_high_priority_pod_evicts_waits_and_binds(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any, *, priority: Callable[[int], str]) -> None:
    node = nodes(1, memory_mib=16384)
    low_class, high_class = priority(10), priority(1000)
    with FakeAgents(kube, namespace):
        sched = launch(config={"scheduler": {"podInitialBackoffSeconds": 0.2,
                                             "podMaxBackoffSeconds": 1}})
        sched.wait_ready()
        start_low(kube, namespace, scheduler_name, low_class, sched)
        kube.create("pods", pod("high", namespace, scheduler_name, high_class))

        wait_for(lambda: terminating(kube, namespace, "low"), 20, "low evicted", sched.log)
        wait_for(lambda: nominated(kube, namespace, "high") == node, 10, "high nominated",
                 sched.log)
        low = pods_of(kube, namespace)["low"]
        # 1.20 has no DisruptionTarget condition: kube-scheduler writes none there, and
        # neither does vgpu (a preemptor waits for any lower-priority pod leaving).
        assert not [c for c in low["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        preempted = events_of(kube, namespace, "low", "Preempted")
        assert preempted and preempted[0]["type"] == "Normal"
        assert node in preempted[0]["message"]
        failed = events_of(kube, namespace, "high", "FailedScheduling")
        assert any(f"preemption: evicting 1 lower-priority pod(s) on node {node} "
                   f"({namespace}/low)" in e["message"] for e in failed), failed

        # While the victim terminates the preemptor waits, holding the GPU.
        time.sleep(2)
        assert "high" not in bound(kube, namespace)
        assert terminating(kube, namespace, "low")
        delete_now(kube, namespace, "low")  # the kubelet confirms
        wait_for(lambda: bound(kube, namespace).get("high") == node, 20, "high bound",
                 sched.log)
    assert len(events_of(kube, namespace, "low", "Preempted")) == 1
    check_not_overcommitted(kube, namespace, [node])
    assert sched.stop() == 0


def test_a_disruption_budget_holds_the_eviction_off_until_it_allows_one(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any, *, priority: Callable[[int], str]) -> None:
    node = nodes(1, memory_mib=16384)
    low_class, high_class = priority(10), priority(1000)
    budget(kube, namespace, 0)
    with FakeAgents(kube, namespace):
        sched = launch(config={"scheduler": {"podInitialBackoffSeconds": 0.2,
                                             "podMaxBackoffSeconds": 1}})
        sched.wait_ready()
        start_low(kube, namespace, scheduler_name, low_class, sched, app="db")
        kube.create("pods", pod("high", namespace, scheduler_name, high_class))

        def refused() -> bool:
            return any("refused by a PodDisruptionBudget" in e["message"]
                       for e in events_of(kube, namespace, "high", "FailedScheduling"))

        wait_for(refused, 20, "the eviction refused", sched.log)
        time.sleep(1.5)  # a few retries, each refused
        assert not terminating(kube, namespace, "low")
        assert nominated(kube, namespace, "high") is None

        budget(kube, namespace, 1)
        wait_for(lambda: terminating(kube, namespace, "low"), 20, "low evicted", sched.log)
        wait_for(lambda: nominated(kube, namespace, "high") == node, 10, "high nominated",
                 sched.log)
        delete_now(kube, namespace, "low")
        wait_for(lambda: bound(kube, namespace).get("high") == node, 20, "high bound",
                 sched.log)
    check_not_overcommitted(kube, namespace, [node])
    assert sched.stop() == 0


def requests_served(kube: adapter.KubeCluster) -> Counter[str]:
    """Every request the API server has served so far, by ``VERB resource[/subresource]``
    (its ``apiserver_request_total``)."""
    status, body = kube.transport.call("GET", "/metrics", query=[], body=None,
                                       content_type="application/json", timeout=30)
    assert status == 200
    out: Counter[str] = Counter()
    for family in text_string_to_metric_families(body.decode()):
        if family.name == "apiserver_request":
            for s in family.samples:
                if s.name.endswith("_total"):
                    sub = s.labels.get("subresource") or ""
                    out[f"{s.labels['verb']} {s.labels['resource']}"
                        + (f"/{sub}" if sub else "")] += int(s.value)
    return out


def test_a_preemption_costs_no_more_calls_than_kube_schedulers(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any, *, priority: Callable[[int], str]) -> None:
    """Two preemptors, each taking a whole GPU shared by three running lower-priority
    pods (three fit on one), on this 1.20 API server: the requests it counts while they
    preempt and bind. kube-scheduler v1.20.2 sends per victim one DELETE and one
    ``Preempted`` event, and per preemptor one status PATCH (its nomination) and a
    ``FailedScheduling`` event (and a ``Scheduled`` one); vgpu-scheduler may send no
    more: per victim one eviction (never a ``policy/v1`` one this server refuses first)
    and one event, no ``DisruptionTarget`` patch (1.20 does not know the condition), per
    preemptor one status patch."""
    gpus = [nodes(1, memory_mib=16384) for _ in range(2)]
    low_class, high_class = priority(10), priority(1000)
    with FakeAgents(kube, namespace) as agents:
        sched = launch(config={"scheduler": {"podInitialBackoffSeconds": 0.2,
                                             "podMaxBackoffSeconds": 1}})
        sched.wait_ready()
        lows = [f"low-{i}" for i in range(6)]
        for name in lows:
            obj = gpu_pod(name, namespace, scheduler_name, builders.container(gpumem=5000))
            obj["spec"]["priorityClassName"] = low_class
            # Gone as soon as it is evicted: no kubelet here to confirm a graceful delete.
            obj["spec"]["terminationGracePeriodSeconds"] = 0
            kube.create("pods", obj)
        wait_for(lambda: set(lows) <= set(bound(kube, namespace)), 30, "lows bound",
                 sched.log)
        for name in lows:
            running(kube, namespace, name)
        wait_for(lambda: agents.marked >= len(lows), 20, "lows allocated", sched.log)
        marked, before = agents.marked, requests_served(kube)

        for name in ("high-0", "high-1"):
            kube.create("pods", pod(name, namespace, scheduler_name, high_class))
        wait_for(lambda: {"high-0", "high-1"} <= set(bound(kube, namespace)), 60,
                 "preemptors bound", sched.log)
        wait_for(lambda: agents.marked >= marked + 2, 20, "preemptors allocated", sched.log)
        time.sleep(2)  # the scheduler's events go out from a queue of their own
        after = requests_served(kube)
        assert sched.stop() == 0
    served = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    assert not set(lows) & set(pods_of(kube, namespace)), served
    assert served.get("POST pods/eviction") == 6, served
    # The preemptors' nominations; the agents' two bind-phase writes are theirs.
    assert served.get("PATCH pods/status", 0) - (agents.marked - marked) <= 2, served
    assert served.get("POST events", 0) <= 6 + 2 * 2, served
    assert "DELETE pods" not in served and "PATCH pods" not in served, served
    check_not_overcommitted(kube, namespace, gpus)
