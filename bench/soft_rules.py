"""Soft rules at upstream's scale, in process: two of kube-scheduler's scheduler_perf
workloads (``test/integration/scheduler_perf/config/performance-config.yaml``, 500Nodes)
on the in-memory cluster, scheduled by the real scheduler with the default profile.

    python bench/soft_rules.py [--nodes 500] [--workload anti|mixed|all] [--runs 3]
                               [--cpu N] [--percentage-of-nodes-to-score P]

* ``anti``, SchedulingPreferredPodAntiAffinity: nodes (4 CPUs, 32 GiB, 8 GPUs of 16 GiB),
  then as many pods as nodes and twice as many more (measured), each a GPU pod
  (``nvidia.com/gpu: 1``, ``gpumem: 1000``) labelled ``color: yellow`` that prefers
  (weight 1, ``kubernetes.io/hostname``) no other such pod on its node. Its soft-rule
  figure is the most such pods on one node (an even spread is 3; kube-scheduler v1.20.2
  put 4).
* ``mixed``, MixedSchedulingBasePod: the nodes in one zone, 200 plain pods, 200 with
  required pod affinity (zone), 200 with required anti-affinity (host), 200 with preferred
  affinity and 200 with preferred anti-affinity (host), then twice the nodes' count of
  plain GPU pods, measured: existing pods' terms are weighed for every one of them.

The AllocationGate is left out of the profile (no node agent runs to let pods through).
Per run one line; last, one JSON object with the medians: the measured pods' decisions/s
(wall clock and CPU of the scheduling thread), decision p50/p99, and the soft figure.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
from typing import Any

from _support import ROOT

sys.path.insert(0, str(ROOT))

from _decisions import recording

from tests.scheduler.helpers import FakeClock
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import DEFAULT_SCHEDULER_PLUGINS, Config, SchedulerConfig
from vgpu_scheduler.host.scheduler import Scheduler

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NAMESPACES = ["sched-test", "sched-setup"]


def _term(color: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key,
            "namespaces": NAMESPACES}


#: Upstream's pod templates: labels and affinity.
TEMPLATES: dict[str, tuple[dict[str, str], dict[str, Any] | None]] = {
    "default": ({}, None),
    "affinity": ({"color": "blue"}, {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("blue", ZONE)]}}),
    "anti-affinity": ({"color": "green"}, {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("green", HOST)]}}),
    "preferred-affinity": ({"color": "red"}, {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": _term("red", HOST)}]}}),
    "preferred-anti-affinity": ({"color": "yellow"}, {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": _term("yellow", HOST)}]}}),
}


def pod(name: str, namespace: str, template: str, *, gpu: bool) -> Obj:
    container = builders.container(gpus=1 if gpu else None, gpumem=1000 if gpu else None,
                                   cpu="100m", memory="500Mi")
    obj = builders.pod(name, [container], namespace=namespace)
    labels, affinity = TEMPLATES[template]
    obj["metadata"]["labels"] = dict(labels)
    if affinity is not None:
        obj["spec"]["affinity"] = affinity
    return obj


def cluster_of(count: int, clock: FakeClock, zone: bool) -> MemoryCluster:
    cluster = MemoryCluster(copy_objects=False)
    for i in range(count):
        name = f"node-{i:05d}"
        cluster.create("nodes", builders.node(
            name, builders.devices(name, 8, memory_mib=16384), cpu="4", memory="32Gi",
            heartbeat=clock.now, labels={ZONE: "zone1"} if zone else {}))
    return cluster


def run(workload: str, nodes: int, percentage: int) -> dict[str, Any]:
    clock = FakeClock()
    cluster = cluster_of(nodes, clock, zone=workload == "mixed")
    plugins = tuple(p for p in DEFAULT_SCHEDULER_PLUGINS if p != "AllocationGate")
    config = Config(scheduler=SchedulerConfig(plugins=plugins,
                                              percentage_of_nodes_to_score=percentage))
    scheduler = Scheduler(config, cluster, clock=clock)
    if workload == "anti":
        setup = [("preferred-anti-affinity", nodes)]
        measured = ("preferred-anti-affinity", "sched-test", 2 * nodes)
    else:
        setup = [(t, 200 * nodes // 500) for t in (
            "default", "affinity", "anti-affinity", "preferred-affinity",
            "preferred-anti-affinity")]
        measured = ("default", "default", 2 * nodes)
    for template, count in setup:
        for k in range(count):
            cluster.create("pods", pod(f"{template}-{k}", "sched-setup", template,
                                       gpu=workload == "anti"))
        scheduler.run_until_idle()
    template, namespace, count = measured
    for k in range(count):
        cluster.create("pods", pod(f"measured-{k}", namespace, template, gpu=True))
    scheduler.pump()
    with recording(scheduler) as log:
        while scheduler.schedule_one():
            pass
    scheduler.run_until_idle()
    pods = cluster.list("pods").items
    out: dict[str, Any] = {"workload": workload, "nodes": nodes, "measured": count,
                           "pending": sum(1 for p in pods if not p["spec"].get("nodeName")),
                           **log.figures()}
    if workload == "anti":
        per_node = collections.Counter(p["spec"]["nodeName"] for p in pods
                                       if p["spec"].get("nodeName"))
        out["most_on_a_node"] = max(per_node.values())
        out["alone_share"] = round(sum(1 for v in per_node.values() if v == 1)
                                   / max(len(per_node), 1), 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--workload", choices=("anti", "mixed", "all"), default="all")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to")
    parser.add_argument("--percentage-of-nodes-to-score", type=int,
                        default=SchedulerConfig().percentage_of_nodes_to_score)
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    workloads = ("anti", "mixed") if args.workload == "all" else (args.workload,)
    summary: dict[str, Any] = {"nodes": args.nodes, "runs": args.runs,
                               "percentage_of_nodes_to_score":
                                   args.percentage_of_nodes_to_score}
    for workload in workloads:
        rows = []
        for number in range(args.runs):
            rows.append(run(workload, args.nodes, args.percentage_of_nodes_to_score))
            print(json.dumps({"run": number, **rows[-1]}), flush=True)
        summary[workload] = {key: statistics.median(r[key] for r in rows)
                             for key in rows[0] if isinstance(rows[0][key], (int, float))
                             and rows[0][key] is not None}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
