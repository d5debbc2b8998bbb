"""Preemption under both schedulers: a high-priority pod on a full node takes the place of
the least important lower-priority pod, and a PodDisruptionBudget turns the choice to
another victim.

v1.20's kube-scheduler deletes its victims, vgpu-scheduler evicts them; with no kubelet
either leaves the victim terminating until the test, acting as the kubelet, deletes it for
good. Victims are Running and Ready, with start times a minute apart: among equal
priorities the later-started pod is the less important (kube's ``MoreImportantPod``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.parity.support import Outcome, Run, both
from tests.e2e.scheduler_kube_support import delete_now, wait_for
from vgpu.kube import adapter

pytestmark = pytest.mark.usefixtures("schedulers")

STARTED = {"low-early": "2026-01-01T00:00:00Z", "low-late": "2026-01-01T00:01:00Z"}


def running(run: Run, name: str) -> None:
    """What the kubelet reports once the containers run."""
    run.kube.patch_status("pods", name, {
        "phase": "Running", "startTime": STARTED[name],
        "conditions": [{"type": "Ready", "status": "True"}]}, run.namespace)


def budget(run: Run, app: str) -> None:
    """A PodDisruptionBudget over ``app`` allowing no disruption (no disruption controller
    runs here: the status is written by hand)."""
    base = f"/apis/policy/v1beta1/namespaces/{run.namespace}/poddisruptionbudgets"
    run.kube.request_json("POST", base, "create pdb", body={
        "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}})
    current = run.kube.request_json("GET", f"{base}/{app}", "get pdb")
    current["status"] = {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                         "expectedPods": 1,
                         "observedGeneration": current["metadata"].get("generation", 1)}
    run.kube.request_json("PUT", f"{base}/{app}/status", "pdb status", body=current)


def preempting(low: str, high: str, protect: str | None = None) -> Callable[[Run], Outcome]:
    def scenario(run: Run) -> Outcome:
        node = run.node(2)
        for i, name in enumerate(STARTED):
            run.pod(name, labels={"app": name}, priorityClassName=low)
            run.settle(i + 1, quiet=0.5)
            running(run, name)
        if protect:
            budget(run, protect)
        run.pod("high", priorityClassName=high)

        def terminating() -> list[str]:
            return sorted(name for name in STARTED
                          if run.pod_obj(name)["metadata"].get("deletionTimestamp"))

        victims = wait_for(terminating, 60, f"a victim of {run.scheduler}")
        wait_for(lambda: run.pod_obj("high")["status"].get("nominatedNodeName") == node, 30,
                 f"high nominated by {run.scheduler}")
        assert "high" not in run.bound()
        for victim in victims:
            delete_now(run.kube, run.namespace, victim)
        wait_for(lambda: run.bound().get("high") == node, 60,
                 f"high bound by {run.scheduler}")
        return {"victims": victims, "kept": sorted(run.bound())}

    return scenario


def test_the_later_started_lower_priority_pod_makes_room(
        control_plane: ControlPlane, kube: adapter.KubeCluster,
        priority: Callable[[int], str]) -> None:
    outcome = both(control_plane, kube, preempting(priority(10), priority(1000)))
    assert outcome == {"victims": ["low-late"], "kept": ["high", "low-early"]}


def test_a_disruption_budget_turns_the_choice_to_another_victim(
        control_plane: ControlPlane, kube: adapter.KubeCluster,
        priority: Callable[[int], str]) -> None:
    outcome = both(control_plane, kube, preempting(priority(10), priority(1000),
                                                   protect="low-late"))
    assert outcome == {"victims": ["low-early"], "kept": ["high", "low-late"]}
