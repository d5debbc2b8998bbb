"""The whole scheduler with NodeReservation on, as its tests drive it: pods with a creation
time, node agents' heartbeats, and the scenario where a pod waiting for whole GPUs holds the
node that is emptying."""

from __future__ import annotations

import datetime as dt
from typing import Any

import vgpu.annotations as ann
from tests.scheduler.e2e_support import allocated, gpu_node, node_of, setup
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, from_mapping
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.gpu.node_reservation import NodeReservation


def stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def config(**knobs: Any) -> Config:
    return from_mapping({"scheduler": {"nodeReservation": {
        "waitSeconds": 60, "holdSeconds": 600, "minGpus": 2, "maxGpuShare": 0.5, **knobs}}})


def make(cluster: MemoryCluster, name: str, container: dict[str, Any], created: float,
         **kw: Any) -> None:
    body = builders.pod(name, [container], **kw)
    body["metadata"]["creationTimestamp"] = stamp(created)
    cluster.create("pods", body)


def beat(cluster: MemoryCluster, at: float) -> None:
    """What the node agents do: a fresh heartbeat (and a node event)."""
    for node in ("a", "b"):
        cluster.patch_annotations("nodes", node, {ann.NODE_HEARTBEAT: codecs.encode_heartbeat(
            dt.datetime.fromtimestamp(at, dt.UTC))})


def later(sched: Scheduler, cluster: MemoryCluster, clock: Any, seconds: float) -> None:
    clock.advance(seconds)
    beat(cluster, clock.now)
    sched.run_until_idle()


WHOLE = builders.container(gpus=2, cores=100)
SHARED = builders.container(gpus=1, gpumem=2000, cores=30)


def scenario(cfg: Config) -> tuple[Scheduler, MemoryCluster, Any, str]:
    """One node with a shared pod (s1) on one of its two GPUs, the other full with a
    whole-GPU pod (w); a pod asking two whole GPUs (big) arrives and waits past the
    bound. Returns the node s1 is on."""
    sched, cluster, clock = setup([gpu_node("a"), gpu_node("b")], cfg)
    for name, container in (("s1", SHARED), ("w", WHOLE)):
        make(cluster, name, container, clock.now)
        sched.run_until_idle()
        allocated(cluster, name)
    a = node_of(cluster, "s1")
    assert a is not None and node_of(cluster, "w") not in (a, None)
    make(cluster, "big", WHOLE, clock.now)
    sched.run_until_idle()
    assert node_of(cluster, "big") is None
    # Past the bound and the queue's retry of parked pods (5 minutes): big is retried, has
    # waited, and holds s1's node.
    later(sched, cluster, clock, 301)
    return sched, cluster, clock, a


def reservation(sched: Scheduler) -> NodeReservation:
    (plugin,) = [p for p in sched.framework.plugins if isinstance(p, NodeReservation)]
    return plugin
