"""Pod rules under both schedulers: host ports, pod (anti-)affinity, topology spread,
taints and preferred node affinity. Each scenario must end the same way under both (see
:mod:`tests.e2e.parity.support`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.parity.support import HOSTNAME, ZONE, Outcome, Run, both, per_node
from tests.e2e.scheduler_kube_support import delete_now
from vgpu.kube import adapter

pytestmark = pytest.mark.usefixtures("schedulers")


def selects(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": selects(app), "topologyKey": key}


def spread(app: str, when: str, key: str = ZONE, skew: int = 1) -> list[dict[str, Any]]:
    return [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
             "labelSelector": selects(app)}]


def test_host_ports_take_one_node_each(control_plane: ControlPlane,
                                       kube: adapter.KubeCluster) -> None:
    def scenario(run: Run) -> Outcome:
        for _ in range(3):
            run.node()
        for i in range(5):
            run.pod(f"web-{i}", ports=[{"containerPort": 8080, "hostPort": 8080}])
        placed = run.settle(3)
        assert max(per_node(placed, placed).values()) == 1, placed
        assert "node(s) didn't have free ports for the requested pod ports" in run.why("web-4")
        return {"pending": run.pending()}

    assert both(control_plane, kube, scenario) == {"pending": {"web-3", "web-4"}}


def test_required_anti_affinity_one_replica_per_node(control_plane: ControlPlane,
                                                     kube: adapter.KubeCluster) -> None:
    """More replicas than nodes: one per node, the rest pending until a node frees."""
    def scenario(run: Run) -> Outcome:
        for _ in range(3):
            run.node(4)
        anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term("web", HOSTNAME)]}}
        for i in range(5):
            run.pod(f"web-{i}", labels={"app": "web"}, affinity=anti)
        placed = run.settle(3)
        assert sorted(per_node(placed, placed).values()) == [1, 1, 1], placed
        assert "node(s) didn't match pod anti-affinity rules" in run.why(min(run.pending()))
        first = {"pending": len(run.pending())}
        delete_now(run.kube, run.namespace, min(placed))  # no kubelet to end it gracefully
        again = run.settle(3, timeout=90)
        assert sorted(per_node(again, again).values()) == [1, 1, 1], again
        return {**first, "after a delete": len(run.pending())}

    assert both(control_plane, kube, scenario) == {"pending": 2, "after a delete": 1}


def test_required_affinity_waits_for_the_other_app_then_joins_its_zone(
        control_plane: ControlPlane, kube: adapter.KubeCluster) -> None:
    def scenario(run: Run) -> Outcome:
        nodes = [run.node(2, labels={ZONE: f"z{i // 2}"}) for i in range(4)]
        near_db = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term("db", ZONE)]}}
        for i in range(3):
            run.pod(f"client-{i}", labels={"app": "client"}, affinity=near_db)
        run.settle(0)
        assert "node(s) didn't match pod affinity rules" in run.why("client-0")
        waiting = {"pending": len(run.pending())}
        run.pod("db", labels={"app": "db"}, nodeSelector={HOSTNAME: nodes[3]})
        placed = run.settle(4, timeout=90)
        return {**waiting, "zones": dict(run.zone_counts(placed))}

    assert both(control_plane, kube, scenario) == {"pending": 3, "zones": {"z1": 4}}


def test_hard_zone_spread_leaves_the_pod_pending_that_would_skew(
        control_plane: ControlPlane, kube: adapter.KubeCluster) -> None:
    """Zone z1's nodes have one GPU each: z0 gets three, z1 two, the sixth would make the
    skew two."""
    def scenario(run: Run) -> Outcome:
        for gpus, zone in ((4, "z0"), (1, "z1"), (4, "z0"), (1, "z1")):
            run.node(gpus, labels={ZONE: zone})
        for i in range(6):
            run.pod(f"s-{i}", labels={"app": "s"},
                    topologySpreadConstraints=spread("s", "DoNotSchedule"))
        placed = run.settle(5)
        (pending,) = run.pending()
        assert "node(s) didn't match pod topology spread constraints" in run.why(pending)
        return {"zones": dict(run.zone_counts(placed))}

    assert both(control_plane, kube, scenario) == {"zones": {"z0": 3, "z1": 2}}


def test_soft_zone_spread_balances_zones_of_unequal_size(
        control_plane: ControlPlane, kube: adapter.KubeCluster) -> None:
    """Three nodes in z0, one in z1: ScheduleAnyway still puts half the replicas in z1."""
    def scenario(run: Run) -> Outcome:
        for zone in ("z0", "z0", "z0", "z1"):
            run.node(4, labels={ZONE: zone})
        for i in range(4):
            run.pod(f"s-{i}", labels={"app": "s"},
                    topologySpreadConstraints=spread("s", "ScheduleAnyway"))
            run.settle(i + 1, quiet=0.5)
        return {"zones": dict(run.zone_counts(run.bound()))}

    assert both(control_plane, kube, scenario) == {"zones": {"z0": 2, "z1": 2}}


def test_taints_and_preferred_node_affinity(control_plane: ControlPlane,
                                            kube: adapter.KubeCluster) -> None:
    """A NoSchedule node takes nothing; pods preferring SSD nodes go there; the others
    avoid the PreferNoSchedule node while an untainted one has room. (Which untainted node
    they take is the node policy's choice: kube-scheduler spreads, vgpu packs GPUs.)"""
    def scenario(run: Run) -> Outcome:
        names = {
            "noschedule": run.node(4, taints=[{"key": "gpu", "value": "reserved",
                                               "effect": "NoSchedule"}]),
            "prefer-not": run.node(4, taints=[{"key": "gpu", "value": "spare",
                                               "effect": "PreferNoSchedule"}]),
            "ssd": run.node(4, labels={"disk": "ssd"}),
            "plain": run.node(4),
        }
        ssd = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
        for i in range(3):
            run.pod(f"ssd-{i}", affinity=ssd)
            run.settle(i + 1, quiet=0.5)
        for i in range(2):
            run.pod(f"any-{i}")
            run.settle(i + 4, quiet=0.5)
        role = {node: role for role, node in names.items()}
        placed = {pod: role[node] for pod, node in run.bound().items()}
        return {"ssd pods": sorted(placed[f"ssd-{i}"] for i in range(3)),
                "on tainted nodes": sorted(p for p, r in placed.items()
                                           if r in ("noschedule", "prefer-not"))}

    assert both(control_plane, kube, scenario) == {"ssd pods": ["ssd", "ssd", "ssd"],
                                                   "on tainted nodes": []}
