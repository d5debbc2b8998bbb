"""Which PodDisruptionBudgets an eviction is charged to (vgpu/cluster/budgets.py), and the
in-memory cluster's eviction that refuses or charges them."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.cluster import budgets
from vgpu.cluster.memory import MemoryCluster
from vgpu.errors import EvictionRefusedError


def pod(*, phase: str = "Running", ready: bool = True, namespace: str = "ml",
        app: str = "a") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": namespace, "labels": {"app": app}},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


def budget(name: str = "b", *, app: str = "a", namespace: str = "ml", allowed: Any = 1,
           healthy: int = 2, desired: int = 2, selector: Any = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector if selector is not None
                     else {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": healthy,
                       "desiredHealthy": desired}}


@pytest.mark.parametrize(("the_pod", "the_budgets", "charged"), [
    (pod(), [budget()], ["b"]),
    (pod(), [budget(app="other")], []),
    (pod(), [budget(namespace="other")], []),
    (pod(), [budget("b1"), budget("b2")], ["b1", "b2"]),
    # A pod that is not running disrupts nothing by leaving.
    (pod(phase="Pending"), [budget()], []),
    (pod(phase="Succeeded"), [budget()], []),
    # An unready pod of budgets that are all met serves nothing...
    (pod(ready=False), [budget(healthy=2, desired=2)], []),
    # ... but one that is short counts it.
    (pod(ready=False), [budget(healthy=1, desired=2)], ["b"]),
    # A malformed selector selects nothing.
    (pod(), [budget(selector={"matchLabels": "app"})], []),
], ids=["selected", "other-labels", "other-namespace", "two", "pending", "finished",
        "unready-met", "unready-short", "malformed-selector"])
def test_guarding(the_pod: dict[str, Any], the_budgets: list[dict[str, Any]],
                  charged: list[str]) -> None:
    assert [b["metadata"]["name"] for b in budgets.guarding(the_budgets, the_pod)] == charged


@pytest.mark.parametrize(("status", "allowed"), [
    ({"disruptionsAllowed": 2}, 2), ({}, 0), ({"disruptionsAllowed": "1"}, 0),
], ids=["given", "missing", "not-a-number"])
def test_allowed(status: dict[str, Any], allowed: int) -> None:
    assert budgets.allowed({"status": status}) == allowed


def test_the_memory_cluster_refuses_then_charges_the_budget() -> None:
    cluster = MemoryCluster()
    cluster.create("pods", pod())
    cluster.create("poddisruptionbudgets", budget(allowed=0))
    with pytest.raises(EvictionRefusedError, match="disruption budget b"):
        cluster.evict("ml", "p")
    assert cluster.get("pods", "p", "ml")
    cluster.patch_status("poddisruptionbudgets", "b", {"disruptionsAllowed": 1}, "ml")
    cluster.evict("ml", "p")
    assert cluster.list("pods").items == []
    left = cluster.get("poddisruptionbudgets", "b", "ml")["status"]
    assert left["disruptionsAllowed"] == 0
