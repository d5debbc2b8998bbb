"""The scale run of ``bench/scheduling.py --nodes N``: a large cluster with pods already
placed, a scheduler cold-started on it, then new pods scheduled one at a time.

The cluster: ``nodes`` synthetic nodes of ``gpus`` GPUs each, spread over four zones, and
``placed`` pods already bound, as the scheduler and the node agent leave them (``nodeName``,
``vgpu.io/assignment``, ``bind-phase: success``), each with a Deployment-style ``app``
label (one of 40 groups) so that InterPodAffinity and PodTopologySpread have pods to count;
with ``constrained`` a share of them also carries required anti-affinity, which every
incoming pod is checked against.

Cold start is what a restarted scheduler does before its first decision: list nodes and
pods through the cluster port, decoding them from JSON as the API adapter does (the bodies
are encoded before the clock starts: that is the API server's work), rebuild the cache
from the inventories and the pods' assignments, and freeze what was listed
(``Scheduler.run``).

Memory: the in-memory cluster lives in the same process, so the scheduler's share is the
process's RSS less what building the cluster added.
"""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any

from _decisions import recording

from vgpu import annotations as ann
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import ALL, Kind, ListResult, Obj, Selector
from vgpu.config import Config
from vgpu_scheduler.host.scheduler import Scheduler

ZONE = "topology.kubernetes.io/zone"
GROUPS = 40


def rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 2**20


class WireCluster(MemoryCluster):
    """An in-memory cluster whose lists come back decoded from JSON, as from the API."""

    def __init__(self) -> None:
        super().__init__(copy_objects=False)
        self._bodies: dict[str, bytes] = {}

    def encode(self, kind: Kind) -> None:
        items = super().list(kind)
        self._bodies[kind] = json.dumps({"items": items.items,
                                         "rv": items.resource_version}).encode()

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult:
        body = self._bodies.pop(kind, None)
        if body is None or selector != ALL:
            return super().list(kind, selector)
        decoded = json.loads(body)
        return ListResult(items=decoded["items"], resource_version=decoded["rv"])


def nodes(count: int, gpus: int, now: float) -> list[Obj]:
    out = []
    for i in range(count):
        name = f"big-{i:05d}"
        out.append(builders.node(name, builders.devices(name, gpus), cpu="192",
                                 memory="2Ti", heartbeat=now,
                                 labels={ZONE: f"zone-{i % 4}"}))
    return out


def placed_pod(k: int, node: str, gpu: int, constrained: float) -> Obj:
    group = {"app": f"group-{k % GROUPS}"}
    container = builders.container(gpus=1, gpumem=4096, cores=10, cpu="4", memory="16Gi")
    pod = builders.pod(f"placed-{k:06d}", [container])
    pod["metadata"]["labels"] = group
    step = round(1 / constrained) if constrained > 0 else 0
    if step and k % step == 0:
        # The anti-affinity of replicas that must not share a node with another group.
        pod["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": f"other-{k % GROUPS}"}},
                "topologyKey": "kubernetes.io/hostname"}]}}
    uuid = f"GPU-{node}-{gpu}"
    assignment = codecs.Assignment(node=node, containers={
        "main": (codecs.GrantedDevice(uuid=uuid, memory_mib=4096, cores=10),)})
    pod["metadata"]["annotations"] = {
        ann.ASSIGNMENT: codecs.encode_assignment(assignment), ann.BIND_PHASE: "success"}
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running"}
    return pod


def build(node_objs: list[Obj], gpus: int, placed: int, constrained: float) -> WireCluster:
    cluster = WireCluster()
    for n in node_objs:
        cluster.create("nodes", n)
    count = len(node_objs)
    for k in range(placed):
        # Two GPUs of each node stay free, for the pods that want whole GPUs.
        gpu = (k // count) % max(1, gpus - 2)
        cluster.create("pods", placed_pod(k, node_objs[k % count]["metadata"]["name"], gpu,
                                          constrained))
    return cluster


def run(config: Config, *, node_count: int, gpus: int, placed: int,
        new_pods: list[Obj], constrained: float, clock: Any) -> dict[str, Any]:
    base = rss_mb()
    cluster = build(nodes(node_count, gpus, clock()), gpus, placed, constrained)
    gc.collect()
    # Before the list bodies are encoded: they are freed (returned to the system) once
    # decoded, and a real scheduler reads them a page at a time.
    with_cluster = rss_mb()
    cluster.encode("nodes")
    cluster.encode("pods")

    t0, c0 = time.perf_counter(), time.process_time()
    scheduler = Scheduler(config, cluster, clock=clock)
    scheduler.pump()
    # What the scheduling loop does once synced (Scheduler.run): the listed pods are
    # folded into their nodes and what was listed is frozen; part of the cold start.
    scheduler.cache.update_snapshot(scheduler.snapshot)
    gc.freeze()
    cold_wall, cold_cpu = time.perf_counter() - t0, time.process_time() - c0

    for p in new_pods:
        cluster.create("pods", p)
    scheduler.pump()
    with recording(scheduler) as log:
        while scheduler.schedule_one():
            pass
    after = rss_mb()
    return {**log.figures(),
            "cold_start_s": round(cold_wall, 3), "cold_start_cpu_s": round(cold_cpu, 3),
            "process_rss_mb": round(after, 1),
            "scheduler_rss_mb": round(after - (with_cluster - base), 1)}
