"""``vgpu simulate --churn``: the replay over time, its table, JSON and plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vgpu.errors import ConfigError
from vgpu_simulate import churn_plot, text_table
from vgpu_simulate.churn import ChurnResult, churn
from vgpu_simulate.policies import SimPolicy
from vgpu_simulate.trace import TraceNode, TracePod

#: Policies compared when none is named: vgpu's default, the paper's FGD, the paper's
#: BestFit and vgpu's policy for waiting pods (it learns its workload as it goes).
DEFAULT_POLICIES = ("lowest-task-count", "fgd", "bestfit", "waiting-aware")
DEFAULT_PLOT = "vgpu-simulate-churn.svg"

#: Columns of the table, and the figures the summary averages over seeds.
FIGURES = ("waiting_gpu_seconds", "wait_mean", "wait_p95", "wait_max", "never_placed",
           "unfit", "fragmented_idle_gpu_seconds", "seconds")


def summarise(results: Sequence[ChurnResult]) -> list[dict[str, Any]]:
    """One entry per policy: the means over its seeds."""
    out: list[dict[str, Any]] = []
    for name in dict.fromkeys(r.policy for r in results):
        runs = [r for r in results if r.policy == name]
        entry: dict[str, Any] = {"policy": name, "seeds": [r.seed for r in runs],
                                 "nodes": runs[0].nodes, "gpus": runs[0].gpus}
        for key in FIGURES:
            entry[key] = round(sum(float(getattr(r, key)) for r in runs) / len(runs), 2)
        out.append(entry)
    return out


def table(summary: Sequence[dict[str, Any]]) -> str:
    header = ["policy", "seeds", "waiting GPU-s", "mean wait s", "p95 s", "max s",
              "never placed", "unfit", "fragmented idle GPU-s", "s/seed"]
    rows = [[s["policy"], ",".join(str(x) for x in s["seeds"]),
             f"{s['waiting_gpu_seconds']:,.0f}", f"{s['wait_mean']:.1f}",
             f"{s['wait_p95']:.0f}", f"{s['wait_max']:.0f}", f"{s['never_placed']:.1f}",
             f"{s['unfit']:.0f}",
             f"{s['fragmented_idle_gpu_seconds']:,.0f}", f"{s['seconds']:.1f}"]
            for s in summary]
    return text_table.render(header, rows)


def check(args: Any) -> None:
    if args.capacity is not None and not args.churn:
        raise ConfigError("--capacity: only with --churn (the fill replay uses every node)")
    if args.churn and (args.topology or args.tenants != 1 or args.fault_domain_isolated
                       or args.isolation or args.users != 1):
        raise ConfigError("--topology, --tenants, --fault-domain-isolated, --isolation, "
                          "--users: not with --churn")


def run(args: Any, nodes: list[TraceNode], pods: list[TracePod], workload: str, *,
        chosen: Sequence[SimPolicy], seeds: Sequence[int], progress: Any) -> int:
    capacity = 1.0 if args.capacity is None else args.capacity
    results: list[ChurnResult] = []
    for policy in chosen:
        for seed in seeds:
            progress.start(f"{policy.name} seed {seed}")
            result = churn(nodes, pods, policy, seed=seed, capacity=capacity,
                           progress=progress)
            progress.end_line()
            results.append(result)
    summary = summarise(results)
    first = results[0]
    print(f"workload: {workload} ({len(pods)} pods) over {first.span / 86400:.0f} days, "
          f"{first.nodes} of {len(nodes)} nodes ({first.gpus} GPUs, --capacity {capacity})")
    print(table(summary))
    if args.json:
        doc: dict[str, Any] = (first.to_json() if len(results) == 1 else
                               {"workload": workload, "capacity": capacity,
                                "runs": [r.to_json() for r in results], "mean": summary})
        text = json.dumps(doc, indent=1)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
    if not args.no_plot:
        # One line per policy: its first seed (the seed picks the nodes, so seeds differ).
        lines = [churn_plot.Line(f"{r.policy} (seed {r.seed})", r.binned())
                 for r in results if r.seed == seeds[0]]
        out = churn_plot.write(args.plot or DEFAULT_PLOT, lines,
                               f"{workload} over time, {first.gpus} GPUs")
        print(f"plot: {out}")
    return 0
