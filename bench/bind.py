"""Pods bound per second and created→bound latency of `vgpu scheduler` on a real API server.

    python bench/bind.py [--runs 3] [--nodes 1000] [--pods 3000] [--gpus 4]
                         [--node-policy binpack|spread] [--bind-workers N]
                         [--create-threads 16] [--kubeconfig FILE]

Each run starts a fresh control plane (etcd + kube-apiserver 1.20 of tests/controlplane;
``--kubeconfig`` uses a running cluster instead), creates ``--nodes`` Nodes with a
``--gpus`` × A100-40GB inventory and a fresh heartbeat, starts ``vgpu scheduler`` as a
process and waits for it to be ready, then creates ``--pods`` GPU pods from
``--create-threads`` threads with no client-side rate limit. A mixed workload (a fixed
seed): 1 GPU with 4-16 GiB and 0-50 % compute, some 2-GPU pods and some asking for a
percentage of GPU memory.

No kubelets, no node agents: a thread here does the agents' part, watching pods and
marking each bound one ``bind-phase: success`` (which opens its node's Permit gate for
the next GPU pod), the way the agent does after Allocate.

Times are client-side: a pod's start is when its create request was sent (the API's
creationTimestamp has whole seconds), its binding is when this process's watch first
shows it with a ``nodeName``. Pods/s is pods over the time from the first create sent to
the last binding seen. ``--rate`` paces the creates instead of sending them as fast as
the threads go: a burst measures throughput (its latencies are mostly time in the queue),
a rate the cluster sustains measures latency.

CPU, per process over that window (kube-apiserver, etcd, the scheduler, the agents'
process, this one's creates): its share of the whole machine (all cores), and its CPU
milliseconds per pod. ``cpu_bound_ceiling_pods_per_s`` is what those per-pod costs allow
on this machine's cores if nothing else ran on them: on a machine shared with other work
the measured rate is lower, and that figure says how much. The last line is one JSON
object: medians over the runs.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from _support import ROOT, cpu_seconds

sys.path.insert(0, str(ROOT))

# After the line above: it imports the test helpers.
from _bind_cluster import NAMESPACE, Agents, Scheduler, check, cluster

from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.kube.adapter import connect


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def workload(count: int, namespace: str, seed: int = 7) -> list[Obj]:
    """The pods, named for ``namespace``'s own scheduler (a cluster may run another)."""
    rng = random.Random(seed)
    c = builders.container
    pods = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.7:
            spec = c(gpumem=rng.randrange(4096, 16385, 1024), cores=rng.choice((0, 10, 25, 50)))
        elif roll < 0.85:
            spec = c(gpus=2, gpumem=rng.randrange(4096, 16385, 1024), cores=rng.choice((0, 25)))
        else:
            spec = c(percent=rng.choice((10, 25, 50)))
        pod = builders.pod(f"p-{i:05d}", [spec], namespace=namespace,
                        scheduler_name=f"vgpu-{namespace}")
        pod["spec"]["automountServiceAccountToken"] = False
        pods.append(pod)
    return pods


def parallel(threads: int, fn: Any, items: list[Any]) -> None:
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            pass


def trace(sched: Scheduler, sent: dict[str, float], done: Any) -> None:
    """Queue lengths and counts every second, on stderr (--trace). Reads the scrape as
    text: parsing every per-GPU series each time would cost more than the scheduler."""
    t0 = time.time()
    wanted = ("vgpu_scheduler_pending_pods{", 'vgpu_scheduler_schedule_attempts_total{result="s',
              'vgpu_scheduler_bindings_total{result="su')
    while not done.wait(1.0):
        with contextlib.suppress(OSError), urllib.request.urlopen(
                f"http://127.0.0.1:{sched.port}/metrics", timeout=10) as resp:
            lines = [line.split(" ") for line in resp.read().decode().splitlines()
                     if line.startswith(wanted)]
            figures = " ".join(f"{name.split('_', 2)[2]}={float(v):g}" for name, v in lines)
            print(f"{time.time() - t0:6.2f}s sent={len(sent)} {figures}", file=sys.stderr,
                  flush=True)


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vgpu-bench-bind-") as tmp, \
            cluster(args.kubeconfig) as (kubeconfig, cp_pids, namespace):
        kube = connect(kubeconfig, qps=0, pool_size=64)
        assert kube is not None
        now = time.time()
        prefix = "node" if namespace == NAMESPACE else namespace
        nodes = [builders.node(f"{prefix}-{i:04d}",
                               builders.devices(f"{prefix}-{i:04d}", args.gpus), heartbeat=now)
                 for i in range(args.nodes)]
        parallel(args.create_threads, lambda n: kube.create("nodes", n), nodes)
        pods = workload(args.pods, namespace)
        sent: dict[str, float] = {}
        config: dict[str, Any] = {"defaultNodePolicy": args.node_policy,
                                  "schedulerName": f"vgpu-{namespace}",
                                  "scheduler": {"apiQps": 0}}
        if args.bind_workers is not None:
            config["scheduler"]["bindWorkers"] = args.bind_workers
        agents = Agents(kubeconfig, namespace, len(pods), args.agent_threads)
        sched = Scheduler(kubeconfig, Path(tmp), config)
        try:
            sched.ready()
            pids = {"kube-apiserver": cp_pids[1], "etcd": cp_pids[0]} if cp_pids else {}
            pids.update(scheduler=sched.proc.pid, agents=agents.pid)
            before = {name: cpu_seconds(pid, children=True) for name, pid in pids.items()}
            before["bench"] = self_cpu()
            load = os.getloadavg()[0]
            interval = 1.0 / args.rate if args.rate else 0.0

            def create(i: int) -> None:
                pod = pods[i]
                if interval:
                    delay = start + i * interval - time.time()
                    if delay > 0:
                        time.sleep(delay)
                sent[pod["metadata"]["name"]] = time.time()
                kube.create("pods", pod)

            start = time.time()
            tracer = threading.Thread(target=trace, args=(sched, sent, agents.done),
                                      daemon=True) if args.trace else None
            if tracer is not None:
                tracer.start()
            parallel(args.create_threads, create, list(range(len(pods))))
            created = time.time()
            if not agents.done.wait(args.timeout):
                raise SystemExit(f"not every pod bound in {args.timeout:g} s\n"
                                 f"{sched.log.read_text()[-3000:]}")
            after = {name: cpu_seconds(pid, children=True) for name, pid in pids.items()}
            after["bench"] = self_cpu()
            metrics = sched.metrics()
        finally:
            sched.stop()
            seen, _, errors = agents.finish()
        if errors:
            raise SystemExit(f"the agents' patches failed: {errors[:5]}")
        end = max(seen.values())
        check(kube, namespace, len(pods))
    wall = end - start
    cores = os.cpu_count() or 1
    latencies = sorted(seen[n] - sent[n] for n in sent)
    cpu = {name: after[name] - before[name] for name in after}
    return {
        "pods": len(pods), "nodes": args.nodes,
        "pods_per_s": round(len(pods) / wall, 1),
        "created_per_s": round(len(pods) / (created - start), 1),
        "create_to_bound_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "create_to_bound_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 1),
        "create_to_bound_max_ms": round(latencies[-1] * 1000, 1),
        "window_s": round(wall, 2),
        "cpu_share": {name: round(sec / (wall * cores), 3) for name, sec in cpu.items()},
        "cpu_ms_per_pod": {name: round(sec * 1000 / len(pods), 2) for name, sec in cpu.items()},
        "cpu_bound_ceiling_pods_per_s": round(cores * len(pods) / sum(cpu.values()), 1),
        "cores": cores, "loadavg_1m_before": round(load, 2),
        "scheduler": {
            "attempts": metrics.get("vgpu_scheduler_schedule_attempts_total{result=scheduled}"),
            "unschedulable": metrics.get(
                "vgpu_scheduler_schedule_attempts_total{result=unschedulable}"),
            "bind_conflicts": metrics.get("vgpu_scheduler_bindings_total{result=conflict}"),
            "events_sent": metrics.get("vgpu_scheduler_events_total{outcome=sent}"),
            "events_dropped": metrics.get("vgpu_scheduler_events_total{outcome=dropped}"),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--gpus", type=int, default=4, help="GPUs per node")
    parser.add_argument("--node-policy", default="binpack", choices=("binpack", "spread"))
    parser.add_argument("--bind-workers", type=int, help="scheduler.bindWorkers")
    parser.add_argument("--create-threads", type=int, default=16)
    parser.add_argument("--agent-threads", type=int, default=16)
    parser.add_argument("--rate", type=float, default=0,
                        help="create pods at this many per second (default: as fast as "
                             "the creating threads go)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--trace", action="store_true", help="print queue lengths as it goes")
    parser.add_argument("--kubeconfig", help="a running cluster (default: start one per run)")
    args = parser.parse_args()
    runs = []
    for i in range(args.runs):
        result = one_run(args)
        runs.append(result)
        print(f"run {i + 1}: " + json.dumps(result), flush=True)
    keys = ("pods_per_s", "created_per_s", "create_to_bound_p50_ms", "create_to_bound_p99_ms",
            "create_to_bound_max_ms")
    summary: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in keys}
    for key in ("cpu_share", "cpu_ms_per_pod"):
        summary[key] = {name: statistics.median(r[key][name] for r in runs)
                        for name in runs[0][key]}
    summary["cpu_bound_ceiling_pods_per_s"] = statistics.median(
        r["cpu_bound_ceiling_pods_per_s"] for r in runs)
    summary["loadavg_1m_before"] = [r["loadavg_1m_before"] for r in runs]
    summary.update(nodes=args.nodes, pods=args.pods, node_policy=args.node_policy,
                   rate=args.rate or "burst",
                   runs=len(runs), cores=runs[0]["cores"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
