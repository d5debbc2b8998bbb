"""``vgpu simulate --churn``: the replay over time, its table, JSON and plot.

Each policy × seed is one run; with more than one, runs go to ``--jobs`` processes, and
the table gives per policy the mean and 95 % interval over its seeds
(:mod:`vgpu_simulate.churn_stats`); the JSON keeps every seed's figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vgpu.errors import ConfigError
from vgpu_simulate import churn_plot, policies, text_table
from vgpu_simulate.churn import ChurnResult, churn
from vgpu_simulate.churn_stats import interval
from vgpu_simulate.load import DEFAULT_WINDOW
from vgpu_simulate.load import check as check_load
from vgpu_simulate.policies import SimPolicy
from vgpu_simulate.trace import TraceNode, TracePod

__all__ = ["DEFAULT_PLOT", "DEFAULT_POLICIES", "DEFAULT_WINDOW", "add_arguments", "check", "run",
           "summarise", "table"]

#: Policies compared when none is named: vgpu's default, the paper's FGD, the paper's
#: BestFit and vgpu's policy for waiting pods (it learns its workload as it goes).
DEFAULT_POLICIES = ("lowest-task-count", "fgd", "bestfit", "waiting-aware")
DEFAULT_PLOT = "vgpu-simulate-churn.svg"

#: The figures averaged over seeds (with their intervals), in the JSON and the table.
FIGURES = ("waiting_gpu_seconds", "wait_mean", "wait_p95", "wait_max", "never_placed",
           "unfit", "allocated_gpu_hours", "fragmented_idle_gpu_seconds", "seconds")
#: With ``--load``, also these.
LOAD_FIGURES = ("offered_load", "achieved_load")


def _figure(result: ChurnResult, key: str) -> float:
    if key == "offered_load":
        return result.load.offered if result.load is not None else 0.0
    return float(getattr(result, key) or 0.0)


def summarise(results: Sequence[ChurnResult]) -> list[dict[str, Any]]:
    """One entry per policy: each figure's mean over its seeds (``<figure>``), the 95 %
    half-width (``<figure>_ci95``) and the per-seed values (``per_seed``)."""
    out: list[dict[str, Any]] = []
    keys = FIGURES + (LOAD_FIGURES if any(r.load is not None for r in results) else ())
    for name in dict.fromkeys(r.policy for r in results):
        runs = [r for r in results if r.policy == name]
        entry: dict[str, Any] = {"policy": name, "seeds": [r.seed for r in runs],
                                 "nodes": runs[0].nodes, "gpus": runs[0].gpus}
        per_seed: dict[str, list[float]] = {}
        for key in keys:
            values = [_figure(r, key) for r in runs]
            found = interval(values)
            digits = 4 if key in LOAD_FIGURES else 2
            entry[key] = round(found.mean, digits)
            entry[f"{key}_ci95"] = round(found.half, digits)
            per_seed[key] = [round(v, digits) for v in values]
        entry["per_seed"] = per_seed
        out.append(entry)
    return out


def _pm(entry: dict[str, Any], key: str, fmt: str) -> str:
    mean = format(entry[key], fmt)
    half = entry[f"{key}_ci95"]
    return mean if len(entry["seeds"]) < 2 else f"{mean} ± {format(half, fmt)}"


def table(summary: Sequence[dict[str, Any]]) -> str:
    loaded = bool(summary) and "achieved_load" in summary[0]
    header = ["policy", "seeds", "waiting GPU-s", "mean wait s", "p95 s", "max s",
              "never placed", "unfit", "GPU-h allocated", "fragmented idle GPU-s",
              *(["achieved load"] if loaded else []), "s/seed"]
    rows = []
    for s in summary:
        seeds = s["seeds"]
        shown = (f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 2
                 and seeds == list(range(seeds[0], seeds[-1] + 1))
                 else ",".join(str(x) for x in seeds))
        rows.append([s["policy"], shown, _pm(s, "waiting_gpu_seconds", ",.0f"),
                     _pm(s, "wait_mean", ".1f"), _pm(s, "wait_p95", ".0f"),
                     f"{s['wait_max']:.0f}", _pm(s, "never_placed", ".1f"),
                     f"{s['unfit']:.0f}", _pm(s, "allocated_gpu_hours", ",.1f"),
                     _pm(s, "fragmented_idle_gpu_seconds", ",.0f"),
                     *([_pm(s, "achieved_load", ".3f")] if loaded else []),
                     f"{s['seconds']:.1f}"])
    return text_table.render(header, rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the loaded, multi-seed replay."""
    parser.add_argument("--load", type=float, metavar="L",
                        help="with --churn: compress the pods' arrival times (durations "
                             "kept, the list replayed in laps) so that the offered GPU "
                             "demand averaged over the window is L x the cluster's GPUs; "
                             "reports offered and achieved load")
    parser.add_argument("--window", type=float, metavar="SECONDS",
                        help="with --load: the replayed time the load is offered over "
                             f"(default {DEFAULT_WINDOW:g})")
    parser.add_argument("--seeds", metavar="RANGE",
                        help="seeds as 42-51 or 42,45,50-51 (added to --seed); with --churn "
                             "the table gives each figure's mean and 95 %% interval")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="with --churn: runs in N processes (default: one per core "
                             "this process may use)")


def check(args: Any) -> None:
    if args.capacity is not None and not args.churn:
        raise ConfigError("--capacity: only with --churn (the fill replay uses every node)")
    if not args.churn and (args.load is not None or args.window is not None):
        raise ConfigError("--load, --window: only with --churn")
    if args.window is not None and args.load is None:
        raise ConfigError("--window: only with --load (it is the replayed load's length)")
    if args.load is not None:
        check_load(args.load, args.window or DEFAULT_WINDOW)
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: at least 1")
    if args.churn and (args.topology or args.tenants != 1 or args.fault_domain_isolated
                       or args.isolation or args.users != 1):
        raise ConfigError("--topology, --tenants, --fault-domain-isolated, --isolation, "
                          "--users: not with --churn")


# -- the runs, in this process or in workers -------------------------------------------------

_shared: dict[str, Any] = {}


def _init(nodes: list[TraceNode], pods: list[TracePod], options: dict[str, Any]) -> None:
    _shared.update(nodes=nodes, pods=pods, options=options)


def _one(policy: str, seed: int) -> ChurnResult:
    result = churn(_shared["nodes"], _shared["pods"], policies.get(policy), seed=seed,
                   **_shared["options"])
    # The per-pod waits are folded into the figures; they need not cross back.
    return dataclasses.replace(result, waits=[])


def default_jobs(runs: int) -> int:
    """One process per core this process may run on, no more than there are runs."""
    return max(1, min(runs, len(os.sched_getaffinity(0))))


def _run_all(args: Any, nodes: list[TraceNode], pods: list[TracePod], *,
             chosen: Sequence[SimPolicy], seeds: Sequence[int], progress: Any,
             options: dict[str, Any]) -> list[ChurnResult]:
    pairs = [(p.name, s) for p in chosen for s in seeds]
    jobs = min(args.jobs or default_jobs(len(pairs)), len(pairs))
    if jobs == 1:
        _init(nodes, pods, options)
        out = []
        for name, seed in pairs:
            progress.start(f"{name} seed {seed}")
            result = churn(nodes, pods, policies.get(name), seed=seed, progress=progress,
                           **options)
            progress.end_line()
            out.append(result)
        return out
    done: dict[tuple[str, int], ChurnResult] = {}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_init,
                                                initargs=(nodes, pods, options)) as pool:
        futures = {pool.submit(_one, name, seed): (name, seed) for name, seed in pairs}
        for future in concurrent.futures.as_completed(futures):
            name, seed = futures[future]
            result = done[(name, seed)] = future.result()
            print(f"{name} seed {seed}: {result.waiting_gpu_seconds:,.0f} waiting GPU-s, "
                  f"{result.seconds:.1f} s", file=sys.stderr, flush=True)
    return [done[pair] for pair in pairs]


def run(args: Any, nodes: list[TraceNode], pods: list[TracePod], workload: str, *,
        chosen: Sequence[SimPolicy], seeds: Sequence[int], progress: Any) -> int:
    capacity = 1.0 if args.capacity is None else args.capacity
    options: dict[str, Any] = {"capacity": capacity, "load": args.load,
                               "window": args.window or DEFAULT_WINDOW}
    results = _run_all(args, nodes, pods, chosen=chosen, seeds=seeds, progress=progress,
                       options=options)
    summary = summarise(results)
    first = results[0]
    if first.load is None:
        print(f"workload: {workload} ({len(pods)} pods) over {first.span / 86400:.0f} days, "
              f"{first.nodes} of {len(nodes)} nodes ({first.gpus} GPUs, --capacity "
              f"{capacity})")
    else:
        made = first.load
        print(f"workload: {workload} ({len(pods)} pods) at --load {made.target:g} over "
              f"{made.window:g} s: {first.nodes} nodes ({first.gpus} GPUs), {made.pods} pods "
              f"in {made.laps} laps (seed {first.seed}), offered {made.offered:.3f}, peak "
              f"{made.offered_peak:.3f}")
    print(table(summary))
    if args.json:
        _write_json(args.json, workload, capacity, results, summary)
    if not args.no_plot:
        out = churn_plot.write(args.plot or DEFAULT_PLOT, churn_plot.lines(results),
                               f"{workload} over time, {first.gpus} GPUs"
                               + (f", load {first.load.target:g}" if first.load else ""))
        print(f"plot: {out}")
    return 0


def _write_json(target: str, workload: str, capacity: float, results: list[ChurnResult],
                summary: list[dict[str, Any]]) -> None:
    doc: dict[str, Any] = (results[0].to_json() if len(results) == 1 else
                           {"workload": workload, "capacity": capacity,
                            "runs": [r.to_json() for r in results], "mean": summary})
    if len(results) > 1 and results[0].load is not None:
        doc["load"] = results[0].load.target
        doc["window"] = results[0].load.window
    text = json.dumps(doc, indent=1)
    if target == "-":
        print(text)
    else:
        Path(target).write_text(text + "\n", encoding="utf-8")
