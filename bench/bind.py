"""Pods bound per second and created→bound latency of `vgpu scheduler` on a real API server.

    python bench/bind.py [--runs 3] [--nodes 1000] [--pods 3000] [--gpus 4]
                         [--against kube-scheduler] [--workload mixed|whole|fractional]
                         [--node-policy binpack|spread] [--permit-gate ambiguous|node]
                         [--bind-workers N] [--create-threads 16] [--kubeconfig FILE]
                         [--profile DIR]

``--against kube-scheduler`` runs, per run and each on a fresh control plane of the same
binaries, the same burst of whole-GPU pods (``nvidia.com/gpu: 1``; the nodes advertise
``nvidia.com/gpu`` in allocatable and carry a vgpu inventory) under kube-scheduler v1.20.2
(tests/controlplane, its default profile) and under vgpu-scheduler, then fractional pods
(``gpumem``, ``gpucores``) under vgpu-scheduler alone; the last line has per scheduler
pods/s, create→bound p50/p99 and the scheduler process's CPU ms per pod, the ratios to
kube-scheduler's, and whether the targets of issue #16 are met. Without it the workload is
``--workload`` (mixed by default).

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

The validating webhook is registered as the manifests do on this 1.20 control plane
(``bench/_bind_webhook.py``: every pod creation and update goes through ``/validate``; the
pods are created as a tenant, the agents' patches come from the one annotation writer),
under either scheduler; ``--no-webhook`` leaves it out. vgpu-scheduler runs with leader
election, as the manifests run it, so every write goes through its Lease's fence
(docs/faults.md#fencing); ``--no-leader-elect`` runs it without.

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
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _support import ROOT, cpu_seconds

sys.path.insert(0, str(ROOT))

# After the line above: it imports the test helpers.
import _bind_requests as requests
import _bind_workloads as workloads
from _bind_cluster import NAMESPACE, Agents, Scheduler, check, cluster, kube_scheduler
from _bind_process import parallel, profiling, rss_mb, self_cpu, trace
from _bind_report import KUBE, PHASES, VGPU, figures, side_by_side, summarise
from _bind_webhook import tenant, validating_webhook

from vgpu.kube.adapter import connect


def one_run(args: argparse.Namespace, kind: str = "mixed",
            scheduler: str = VGPU) -> dict[str, Any]:
    """One burst of ``kind`` pods under ``scheduler`` on a fresh cluster."""
    with tempfile.TemporaryDirectory(prefix="vgpu-bench-bind-") as tmp, \
            cluster(args.kubeconfig) as (kubeconfig, cp_pids, namespace, cp), \
            contextlib.ExitStack() as stack:
        kube = connect(kubeconfig, qps=0, pool_size=64)
        assert kube is not None
        prefix = "node" if namespace == NAMESPACE else namespace
        nodes = workloads.nodes(prefix, args.nodes, args.gpus, time.time())
        parallel(args.create_threads, lambda n: kube.create("nodes", n), nodes)
        name = f"{'kube' if scheduler == KUBE else 'vgpu'}-{namespace}"
        if args.placed:
            # Before the scheduler starts: its informers list them, as after a restart.
            kube.request_json("POST", "/api/v1/namespaces", "create namespace", body={
                "metadata": {"name": workloads.PLACED_NAMESPACE}})
            # No controller-manager makes it: pod admission needs the namespace's account.
            kube.request_json(
                "POST", f"/api/v1/namespaces/{workloads.PLACED_NAMESPACE}/serviceaccounts",
                "create service account", body={"metadata": {"name": "default"}})
            parallel(args.create_threads, lambda p: kube.create("pods", p),
                     workloads.placed(args.placed, nodes, args.gpus, name))
        webhook_pid, creator = None, kube
        if args.webhook:
            webhook_pid = stack.enter_context(validating_webhook(kube, kubeconfig, Path(tmp),
                                                                 name))
            tenant_client = connect(kubeconfig, qps=0, pool_size=64)
            assert tenant_client is not None
            tenant(tenant_client, namespace)
            creator = tenant_client
        pods = workloads.pods(kind, args.pods, namespace, name)
        sent: dict[str, float] = {}
        agents = Agents(kubeconfig, namespace, len(pods), args.agent_threads)
        sched: Scheduler | None = None
        try:
            started = time.monotonic()
            if scheduler == KUBE:
                sched_pid = stack.enter_context(kube_scheduler(cp, name))
            else:
                config: dict[str, Any] = {"defaultNodePolicy": args.node_policy,
                                          "schedulerName": name,
                                          "scheduler": {"apiQps": 0,
                                                        "permitGate": args.permit_gate}}
                if args.bind_workers is not None:
                    config["scheduler"]["bindWorkers"] = args.bind_workers
                sched = Scheduler(kubeconfig, Path(tmp), config, args.leader_elect)
                stack.callback(sched.stop)
                sched.ready()
                sched_pid = sched.proc.pid
            # From the process's start to its first scheduling: informers listed and synced.
            startup = time.monotonic() - started
            pids = {"kube-apiserver": cp_pids[1], "etcd": cp_pids[0]} if cp_pids else {}
            pids.update(scheduler=sched_pid, agents=agents.pid)
            if webhook_pid is not None:
                pids["webhook"] = webhook_pid
            before = {name: cpu_seconds(pid, children=True) for name, pid in pids.items()}
            before["bench"] = self_cpu()
            load = os.getloadavg()[0]
            asked = requests.counts(kube)
            interval = 1.0 / args.rate if args.rate else 0.0

            def create(i: int) -> None:
                pod = pods[i]
                if interval:
                    delay = start + i * interval - time.time()
                    if delay > 0:
                        time.sleep(delay)
                sent[pod["metadata"]["name"]] = time.time()
                creator.create("pods", pod)

            if args.profile and sched is not None:
                stack.enter_context(profiling(sched_pid, Path(args.profile) / f"{kind}.txt"))
            start = time.time()
            if args.trace and sched is not None:
                threading.Thread(target=trace, args=(sched, sent, agents.done),
                                 daemon=True).start()
            parallel(args.create_threads, create, list(range(len(pods))))
            created = time.time()
            if not agents.done.wait(args.timeout):
                tail = sched.log.read_text()[-3000:] if sched is not None else ""
                raise SystemExit(f"not every pod bound in {args.timeout:g} s\n{tail}")
            after = {name: cpu_seconds(pid, children=True) for name, pid in pids.items()}
            after["bench"] = self_cpu()
            rss = rss_mb(sched_pid)
            metrics = sched.metrics() if sched is not None else {}
            wrote = requests.per_pod(asked, requests.settled(kube), len(pods))
        finally:
            stack.close()
            seen, _, errors = agents.finish()
        if errors:
            raise SystemExit(f"the agents' patches failed: {errors[:5]}")
        end = max(seen.values())
        check(kube, namespace, len(pods), assigned=scheduler == VGPU)
    return figures(pods=len(pods), nodes=args.nodes, start=start, created=created, end=end,
                   latencies=sorted(seen[n] - sent[n] for n in sent),
                   cpu={name: after[name] - before[name] for name in after}, load=load,
                   metrics=metrics) | wrote | {"scheduler_startup_s": round(startup, 2),
                                               "scheduler_rss_mb": rss,
                                               "placed": args.placed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--gpus", type=int, default=4, help="GPUs per node")
    parser.add_argument("--against", choices=(KUBE,),
                        help="the same whole-GPU burst under kube-scheduler and under "
                             "vgpu-scheduler, then fractional pods under vgpu-scheduler")
    parser.add_argument("--workload", default="mixed", choices=workloads.KINDS,
                        help="the pods without --against")
    parser.add_argument("--node-policy", default="binpack", choices=("binpack", "spread"))
    parser.add_argument("--permit-gate", default="ambiguous", choices=("ambiguous", "node"),
                        help="scheduler.permitGate")
    parser.add_argument("--bind-workers", type=int, help="scheduler.bindWorkers")
    parser.add_argument("--no-leader-elect", dest="leader_elect", action="store_false",
                        help="run vgpu-scheduler without leader election (and so without "
                             "its fence), unlike the manifests")
    parser.add_argument("--placed", type=int, default=0,
                        help="pods already bound before each scheduler starts (whole GPUs "
                             "spread over the nodes, in a namespace of their own)")
    parser.add_argument("--create-threads", type=int, default=16)
    parser.add_argument("--agent-threads", type=int, default=16)
    parser.add_argument("--rate", type=float, default=0,
                        help="create pods at this many per second (default: as fast as "
                             "the creating threads go)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--trace", action="store_true", help="print queue lengths as it goes")
    parser.add_argument("--no-webhook", dest="webhook", action="store_false",
                        help="leave the validating webhook out (as before issue 24)")
    parser.add_argument("--kubeconfig", help="a running cluster (default: start one per run)")
    parser.add_argument("--profile", metavar="DIR",
                        help="py-spy the vgpu scheduler through each burst: collapsed stacks "
                             "in DIR/<workload>.txt")
    args = parser.parse_args()
    if min(args.runs, args.nodes, args.pods, args.gpus) < 1:
        parser.error("--runs, --nodes, --pods and --gpus must be at least 1")
    if args.placed > args.nodes * (args.gpus - 1) or \
            args.nodes * args.gpus - args.placed < args.pods:
        parser.error("--placed takes at most every GPU of a node but its last, and leaves "
                     "a GPU for each pod of the burst: placed ≤ nodes × (gpus - 1) and "
                     "pods ≤ nodes × gpus - placed")
    if args.against and args.kubeconfig:
        parser.error("--against starts its own control planes; leave out --kubeconfig")
    if args.against:
        side: list[dict[str, Any]] = []
        for i in range(args.runs):
            run = {}
            for label, scheduler, kind in PHASES:
                run[label] = one_run(args, kind, scheduler)
                print(f"run {i + 1} {label}: " + json.dumps(run[label]), flush=True)
            side.append(run)
        result = side_by_side(side)
        result.update(against=args.against, nodes=args.nodes, gpus=args.gpus, pods=args.pods,
                      node_policy=args.node_policy, permit_gate=args.permit_gate,
                      runs=args.runs, cores=os.cpu_count())
        print(json.dumps(result))
        return
    runs = []
    for i in range(args.runs):
        result = one_run(args, args.workload)
        runs.append(result)
        print(f"run {i + 1}: " + json.dumps(result), flush=True)
    summary = summarise(runs)
    summary.update(nodes=args.nodes, pods=args.pods, node_policy=args.node_policy,
                   workload=args.workload, permit_gate=args.permit_gate,
                   rate=args.rate or "burst", runs=len(runs), cores=runs[0]["cores"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
