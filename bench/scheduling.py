"""Scheduler throughput, decision latency and memory on the openb node sets.

    python bench/scheduling.py [--runs 3] [--cpu N] [--pods N]
                               [--percentage-of-nodes-to-score N] [--constrained FRACTION]
    python bench/scheduling.py --nodes 5000 [--gpus-per-node 8] [--placed 50000] [--runs 3]

For each node set (the 1,213 GPU nodes of the Alibaba openb trace, and a synthetic
1,000 nodes × 8 GPUs) the pods of ``openb_pod_list_default.csv`` are created in trace
order on an in-memory cluster and scheduled one at a time by the real scheduler with the
default policies (GPU ``lowest-task-count``, node ``binpack``). The AllocationGate is left
out of the profile: with no node agent to move pods to ``bind-phase: success`` every
node would stay gated after its first GPU pod.

* decision latency: one scheduling cycle (pop, snapshot update, PreFilter, Filter,
  Score, Reserve, assume, Permit), per pod, wall clock and CPU time of the thread (the box
  these numbers come from is shared: CPU time is what one core spends, wall clock also
  counts the time other processes held the core);
* decisions/s: scheduling cycles per second of their total time (the scheduling loop's
  rate; the deployment binds on other threads);
* steps/s: ``schedule_one()`` as a whole, which also binds inline through the port;
* peak RSS: after 10,000 pods are placed on the synthetic node set (its own process).

With ``--constrained 0.2`` every fifth pod belongs to one of 40 replica groups and carries,
by turns, required anti-affinity one per node, a hard zone spread (maxSkew 1) or a soft one,
and the nodes are spread over four zones: the cost of InterPodAffinity and
PodTopologySpread when they have work to do. With ``--topology mixed`` (a
``vgpu.topology.shapes`` name) every node's inventory carries that GPU topology, so the
trace's multi-GPU pods are placed by their links: the cost of the topology-aware choice.

With ``--nodes N`` it runs the scale case instead (see ``bench/_scale.py``): N synthetic
nodes with ``--placed`` pods already bound, a cold start (list through the cluster port,
JSON-decoded, and the cache rebuilt from the pods' assignments), then ``--pods`` trace pods
(default 5,000) scheduled; each run in a process of its own, so that RSS is its own.

Runs pinned to one CPU. Prints one line per run and, last, one JSON object with the
medians over the runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from _support import ROOT

sys.path.insert(0, str(ROOT))

import _scale
from _decisions import recording
from _openb import clock, constrain, openb_nodes, synthetic_nodes, trace_pods, zoned

from vgpu.cluster.memory import MemoryCluster
from vgpu.config import DEFAULT_SCHEDULER_PLUGINS, Config, SchedulerConfig
from vgpu_scheduler.host.attempt_record import AttemptRecord
from vgpu_scheduler.host.scheduler import Scheduler


def make(nodes: list[dict[str, Any]], percentage: int) -> tuple[Scheduler, MemoryCluster]:
    plugins = tuple(p for p in DEFAULT_SCHEDULER_PLUGINS if p != "AllocationGate")
    config = Config(scheduler=SchedulerConfig(plugins=plugins,
                                              percentage_of_nodes_to_score=percentage))
    cluster = MemoryCluster(copy_objects=False)
    for n in nodes:
        cluster.create("nodes", n)
    scheduler = Scheduler(config, cluster, clock=clock)
    scheduler.pump()
    return scheduler, cluster


def run_set(name: str, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
            percentage: int) -> dict[str, Any]:
    scheduler, cluster = make(nodes, percentage)
    for p in pods:
        cluster.create("pods", p)
    scheduler.pump()
    steps_wall = steps_cpu = 0.0
    steps = 0
    perf, thread = time.perf_counter, time.thread_time
    with recording(scheduler) as log:
        while True:
            t0, c0 = perf(), thread()
            if not scheduler.schedule_one():
                break
            steps_wall += perf() - t0
            steps_cpu += thread() - c0
            steps += 1
    return {
        "set": name, "nodes": len(nodes), "pods": len(pods),
        **log.figures(),
        # schedule_one() as a whole, binding inline through the in-memory port.
        "steps_per_s": round(steps / steps_wall, 1),
        "steps_per_cpu_s": round(steps / steps_cpu, 1),
    }


def memory_run(target: int, percentage: int) -> dict[str, Any]:
    """Place ``target`` trace pods on the synthetic node set (trace repeated under new
    names as needed); report the process's peak RSS, in-memory cluster included."""
    scheduler, cluster = make(synthetic_nodes(), percentage)
    placed = 0

    def listen(d: AttemptRecord) -> None:
        nonlocal placed
        if d.outcome == "scheduled":
            placed += 1

    scheduler.listeners.append(listen)
    created = 0
    for rounds in range(3):
        pods = trace_pods(suffix=f"-r{rounds}")
        for chunk in range(0, len(pods), 1000):
            for p in pods[chunk:chunk + 1000]:
                cluster.create("pods", p)
                created += 1
            scheduler.pump()
            while placed < target and scheduler.schedule_one():
                pass
            if placed >= target:
                break
        if placed >= target:
            break
    scheduler.pump()  # the watch confirms the bindings: steady state
    gc.collect()
    return {"placed": placed, "pods_created": created,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def scale_run(args: argparse.Namespace) -> dict[str, Any]:
    plugins = tuple(p for p in DEFAULT_SCHEDULER_PLUGINS if p != "AllocationGate")
    config = Config(scheduler=SchedulerConfig(
        plugins=plugins, percentage_of_nodes_to_score=args.percentage_of_nodes_to_score))
    pods = constrain(trace_pods(args.pods or 5000, suffix="-new"), args.constrained)
    out = _scale.run(config, node_count=args.nodes, gpus=args.gpus_per_node,
                     placed=args.placed, new_pods=pods, constrained=args.constrained,
                     clock=clock)
    return {
        "set": f"synthetic-{args.nodes}x{args.gpus_per_node}", "nodes": args.nodes,
        "placed": args.placed, "pods": len(pods),
        **out,
    }


def scale_main(args: argparse.Namespace, cpu: int) -> int:
    rows = []
    for run in range(args.runs):
        argv = [sys.executable, __file__, "--scale-only", "--cpu", str(cpu),
                "--nodes", str(args.nodes), "--gpus-per-node", str(args.gpus_per_node),
                "--placed", str(args.placed),
                "--percentage-of-nodes-to-score", str(args.percentage_of_nodes_to_score),
                "--constrained", str(args.constrained)]
        if args.pods:
            argv += ["--pods", str(args.pods)]
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps({"run": run, **rows[-1]}), flush=True)
    summary: dict[str, Any] = {"runs": args.runs, "cpu": cpu,
                               "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
                               "constrained": args.constrained, "topology": args.topology}
    summary.update({key: statistics.median(r[key] for r in rows)
                    for key in rows[0] if isinstance(rows[0][key], (int, float))})
    print(json.dumps(summary))
    return 0


def pin(cpu: int | None) -> int:
    allowed = sorted(os.sched_getaffinity(0))
    chosen = cpu if cpu is not None else allowed[-1]
    os.sched_setaffinity(0, {chosen})
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    parser.add_argument("--pods", type=int, default=None, help="trace pods per run (default all)")
    parser.add_argument("--percentage-of-nodes-to-score", type=int,
                        default=SchedulerConfig().percentage_of_nodes_to_score,
                        help="scheduler.percentageOfNodesToScore (0: kube-scheduler's "
                             "adaptive share)")
    parser.add_argument("--memory-target", type=int, default=10_000)
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--constrained", type=float, default=0.0,
                        help="fraction of pods with anti-affinity or topology spread")
    parser.add_argument("--nodes", type=int, default=0,
                        help="scale case: this many synthetic nodes (see bench/_scale.py)")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--placed", type=int, default=50_000,
                        help="scale case: pods already bound when the scheduler starts")
    parser.add_argument("--scale-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--topology", default=None, metavar="SHAPE",
                        help="give the nodes of both sets this GPU topology (a "
                             "vgpu.topology.shapes name), so that multi-GPU pods are "
                             "placed by their links")
    args = parser.parse_args()
    cpu = pin(args.cpu)
    if args.scale_only:
        print(json.dumps(scale_run(args)))
        return 0
    if args.nodes:
        return scale_main(args, cpu)
    if args.memory_only:
        print(json.dumps(memory_run(args.memory_target, args.percentage_of_nodes_to_score)))
        return 0
    sets = {"openb-1213": openb_nodes(args.topology),
            "synthetic-1000x8": synthetic_nodes(topology=args.topology)}
    if args.constrained:
        sets = {name: zoned(nodes) for name, nodes in sets.items()}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sets}
    memory: list[dict[str, Any]] = []
    for run in range(args.runs):
        for name, nodes in sets.items():
            pods = constrain(trace_pods(args.pods), args.constrained)
            result = run_set(name, nodes, pods, args.percentage_of_nodes_to_score)
            results[name].append(result)
            print(json.dumps({"run": run, **result}), flush=True)
        out = subprocess.run(
            [sys.executable, __file__, "--memory-only", "--cpu", str(cpu),
             "--memory-target", str(args.memory_target),
             "--percentage-of-nodes-to-score", str(args.percentage_of_nodes_to_score)],
            capture_output=True, text=True, check=True)
        memory.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps({"run": run, **memory[-1]}), flush=True)
    summary: dict[str, Any] = {"runs": args.runs, "cpu": cpu,
                               "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
                               "constrained": args.constrained, "topology": args.topology}
    for name, rows in results.items():
        summary[name] = {key: statistics.median(r[key] for r in rows)
                         for key in rows[0] if isinstance(rows[0][key], (int, float))}
    summary["memory"] = {key: statistics.median(m[key] for m in memory) for key in memory[0]}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
