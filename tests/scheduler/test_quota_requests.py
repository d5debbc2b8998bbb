"""The derived quota requests (``vgpu.io/memory-mib``, ...) are no node resource to vgpu's
scheduler: names under ``vgpu.io/`` are vgpu's own, accounted for by its GPU plugins, so
NodeResourcesFit never looks for them in a node's allocatable (no node advertises them).
The pods here carry them as the webhook writes them, on nodes that advertise none."""

from __future__ import annotations

from typing import Any

from tests.scheduler.e2e_support import gpu_node, node_of, setup
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.quota_charge import NAMES, Charge


def charged(name: str, charge: Charge, **container: Any) -> Obj:
    c = builders.container(**container)
    resources = c["resources"]
    for part in ("limits", "requests"):
        resources.setdefault(part, {}).update(charge.resources())
    return builders.pod(name, [c])


def test_a_pod_with_derived_requests_is_placed_on_a_node_advertising_none() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2, cpu="4")])
    node = cluster.get("nodes", "n1")
    assert not set(NAMES) & set(node["status"]["allocatable"])
    cluster.create("pods", charged("a", Charge(2, 8000, 60), gpus=2, gpumem=4000, cores=30,
                                   cpu="1"))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"


def test_cpu_still_counts_beside_them() -> None:
    # NodeResourcesFit keeps checking what nodes do advertise: CPU refuses this one.
    sched, cluster, _ = setup([gpu_node("n1", 2, cpu="1")])
    cluster.create("pods", charged("b", Charge(1, 1000, 0), gpus=1, gpumem=1000, cpu="2"))
    sched.run_until_idle()
    assert node_of(cluster, "b") is None
