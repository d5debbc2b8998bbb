"""Upstream's scheduler_perf workloads as GPU pods, vgpu-scheduler beside kube-scheduler
v1.20.2 on the real API server, each run's end state checked.

    python bench/scheduler_perf.py [--nodes 500] [--workloads NAME,...] [--gpus 4]
                                   [--schedulers kube-scheduler,vgpu-scheduler]
                                   [--vgpu-config FILE] [--timeout 600] [--list]

The workloads are Kubernetes' own scheduler benchmark, ``test/integration/scheduler_perf``
(``config/performance-config.yaml`` and its pod templates, v1.21), transcribed in
``bench/_perf_workloads.py`` (``--list`` names them with what each does): plain pods,
required and preferred pod affinity and anti-affinity, node affinity, hard and soft zone
spread, a mix of them, preemption, pods that fit nowhere, and churn of nodes, services
and unschedulable high-priority pods. Every pod also asks for a vGPU
(``nvidia.com/gpu: 1``, ``nvidia.com/gpumem: 1000``); every node has ``--gpus`` GPUs (a
vgpu inventory, and the same totals as extended resources for kube-scheduler). Counts are
upstream's ``500Nodes`` ones scaled to ``--nodes`` at the same pods per node.

Each workload runs once under each scheduler, back to back, each on a fresh control plane
of ``tests/controlplane`` with ``bench/bind.py``'s harness: kube-scheduler v1.20.2 with its
default profile (``tests/controlplane/kube_scheduler.py``, client QPS 1000), or
``vgpu scheduler`` with its defaults but an unlimited client rate (``apiQps: 0``) and
leader election as the manifests run it (``--vgpu-config`` merges a YAML file of
settings over that); a process stands in for the node agents (marks each bound pod
``bind-phase: success``); the validating webhook is registered as the manifests do.

Measured, for the step upstream collects metrics on: pods/s (its pods over the time from
the first create sent to the last binding seen) and create→bound p50/p99 (client side),
the CPU per pod of every process, the API writes per pod. Checked, on the end state: every
hard rule (pods that had to be bound are; node resources, GPU capacity, node affinity,
required pod affinity and anti-affinity, DoNotSchedule spread) and the soft ones'
measures (most matching pods in one domain and the share alone for preferred
anti-affinity, the share together for preferred affinity, the skew of a ScheduleAnyway
spread). Targets (issue 44): no hard rule broken; vgpu pods/s ≥ 1.0× kube-scheduler's with
p99 no worse; preferred anti-affinity's worst domain ≤ kube-scheduler's + 1.

Prints one line per run, a markdown table, and last one JSON object: per workload both
runs, the ratios vgpu/kube and the targets met. A run that does not finish within
``--timeout`` is reported with its ``error`` and checked as it stands.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from _support import ROOT

sys.path.insert(0, str(ROOT))

# After the line above: the harness imports the test helpers.
import _perf_workloads as wl
from _perf_report import SCHEDULERS, brief_line, side_by_side, summary, table
from _perf_run import Options, run


def _names(text: str, known: list[str] | tuple[str, ...], what: str,
           parser: argparse.ArgumentParser) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        parser.error(f"--{what}: unknown {', '.join(unknown) or '(none given)'}; "
                     f"one or more of {', '.join(known)}")
    return names


def _vgpu_config(path: str | None, parser: argparse.ArgumentParser) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        parser.error(f"--vgpu-config {path}: {exc}")
    if not isinstance(loaded, dict):
        parser.error(f"--vgpu-config {path}: expected a mapping of vgpu settings")
    return loaded


def _listing(nodes: int) -> str:
    lines = []
    for w in (wl.scaled(w, nodes) for w in wl.WORKLOADS):
        steps = [f"{op.count} nodes" + (f" in {len(op.zones)} zones" if op.zones else "")
                 if isinstance(op, wl.CreateNodes) else
                 f"churn every {op.interval_ms} ms" if isinstance(op, wl.Churn) else
                 f"{op.count} {op.template}" + (" (measured)" if op.measure else "")
                 + ("" if op.wait else " (not waited for)")
                 for op in w.ops]
        lines.append(f"{w.name} (upstream {w.upstream}): {'; '.join(steps)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    parser.add_argument("--nodes", type=int, default=500,
                        help="cluster size; upstream's 500Nodes counts scaled to it")
    parser.add_argument("--workloads", default=",".join(wl.BY_NAME),
                        help="comma-separated workload names (default: all; see --list)")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS),
                        help="comma-separated; both by default (the ratios need both)")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs per node (A100-40GB)")
    parser.add_argument("--vgpu-config", metavar="FILE",
                        help="YAML settings merged over vgpu-scheduler's (e.g. "
                             "'scheduler: {percentageOfNodesToScore: 100}')")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds a step may take to have its pods bound")
    parser.add_argument("--create-threads", type=int, default=16,
                        help="threads creating the pods and nodes (no client rate limit)")
    parser.add_argument("--agent-threads", type=int, default=16,
                        help="threads of the agents' stand-in sending its patches")
    parser.add_argument("--no-webhook", dest="webhook", action="store_false",
                        help="leave the validating webhook out")
    parser.add_argument("--no-leader-elect", dest="leader_elect", action="store_false",
                        help="run vgpu-scheduler without leader election")
    parser.add_argument("--list", action="store_true",
                        help="print the workloads at --nodes, step by step, and exit")
    args = parser.parse_args()
    if args.nodes < 1 or args.gpus < 1 or args.timeout <= 0:
        parser.error("--nodes and --gpus must be at least 1, --timeout above 0")
    if args.list:
        print(_listing(args.nodes))
        return
    workloads = _names(args.workloads, list(wl.BY_NAME), "workloads", parser)
    schedulers = _names(args.schedulers, SCHEDULERS, "schedulers", parser)
    opts = Options(gpus=args.gpus, timeout=args.timeout, create_threads=args.create_threads,
                   agent_threads=args.agent_threads, webhook=args.webhook,
                   leader_elect=args.leader_elect,
                   vgpu_config=_vgpu_config(args.vgpu_config, parser))
    results: dict[str, Any] = {}
    for name in workloads:
        workload = wl.scaled(wl.BY_NAME[name], args.nodes)
        runs = {}
        for scheduler in schedulers:
            try:
                runs[scheduler] = run(workload, scheduler, opts)
            except (SystemExit, Exception) as exc:
                # A harness failure (a process that did not start, the API server gone):
                # this run's error, nothing of it measured or checked; the others go on.
                runs[scheduler] = {"error": f"{type(exc).__name__}: {exc}"[:2000],
                                   "hard_total": None, "soft": {}}
            print(brief_line(name, scheduler, runs[scheduler]), flush=True)
            print(f"run {name} {scheduler}: {json.dumps(runs[scheduler])}", flush=True)
        results[name] = side_by_side(runs)
    print()
    print(table(results))
    print()
    print(json.dumps({"nodes": args.nodes, "gpus_per_node": args.gpus,
                      "schedulers": schedulers, "cores": os.cpu_count(),
                      "vgpu_config": opts.vgpu_config, "webhook": args.webhook,
                      **summary(results), "workloads": results}))


if __name__ == "__main__":
    main()
