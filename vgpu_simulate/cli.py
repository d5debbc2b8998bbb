"""``vgpu simulate``: replay a workload trace through the scheduler and compare policies.

With no arguments it replays the bundled Alibaba GPU-sharing trace (the FGD paper's
default workload) with vgpu's default policy and its fragmentation-aware policy for one
seed, prints a table and writes ``vgpu-simulate.svg``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from vgpu.errors import ConfigError
from vgpu.topology import shapes
from vgpu_simulate import bundled, churn_cli, plot, published, text_table
from vgpu_simulate import policies as sim_policies
from vgpu_simulate.churn_stats import parse_seeds
from vgpu_simulate.links import check_shape
from vgpu_simulate.replay import RunResult, peak_rss_mib, replay
from vgpu_simulate.tenancy import Tenancy, tenancy_arguments, tenancy_line
from vgpu_simulate.trace import TraceNode, TracePod, load_nodes, load_pods

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "replay a workload trace through the scheduler, no cluster needed"

DEFAULT_SEED = 42
DEFAULT_PLOT = "vgpu-simulate.svg"
PAPER_INFLATE = 1.3


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay a workload trace through the vgpu scheduler on an in-memory cluster and "
        "report how full the GPUs get under each placement policy. With no arguments: the "
        "bundled Alibaba GPU-sharing trace (FGD paper, ATC'23), vgpu's default and "
        "fragmentation-aware policies, seed 42.")
    parser.add_argument("--nodes", metavar="NODES.csv",
                        help="node list (sn,cpu_milli,memory_mib,gpu,model); default: bundled")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pods", metavar="PODS.csv",
                        help="pod list (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...)")
    source.add_argument("--variant", choices=bundled.VARIANTS,
                        help="a bundled pod list (default: default)")
    parser.add_argument("--policy", action="append", metavar="NAME",
                        help=f"placement policy, repeatable; one of "
                             f"{', '.join(sim_policies.POLICIES)} (default: "
                             f"{sim_policies.DEFAULT} and {sim_policies.BEST})")
    parser.add_argument("--seed", action="append", type=int, metavar="N",
                        help="arrival-order seed, repeatable (the paper uses 42..51; "
                             f"default {DEFAULT_SEED})")
    parser.add_argument("--inflate", type=float, default=1.3, metavar="RATIO",
                        help="top the pod list up (or trim it) to RATIO x GPU capacity "
                             "(default 1.3; 0 keeps the list as it is)")
    parser.add_argument("--topology", metavar="SHAPE",
                        help="give every node this GPU topology for its GPU count (one of "
                             f"{', '.join(shapes.SHAPES)}) and report the share of "
                             "multi-GPU pods that got their node's best possible link")
    parser.add_argument("--hide-links", action="store_true",
                        help="with --topology: the nodes publish no links, so the "
                             "scheduler places without them (the baseline); the share is "
                             "still measured")
    parser.add_argument("--churn", action="store_true",
                        help="replay over time: pods arrive at creation_time and leave at "
                             "deletion_time, pods that fit nowhere wait in the scheduler's "
                             "queue; reports how long GPU pods wait")
    parser.add_argument("--capacity", type=float, metavar="FRACTION",
                        help="with --churn: keep a seeded random FRACTION of the nodes "
                             "(default 1)")
    churn_cli.add_arguments(parser)
    tenancy_arguments(parser)
    parser.add_argument("--json", metavar="OUT", help="write results as JSON ('-': stdout)")
    parser.add_argument("--plot", metavar="OUT",
                        help=f"write the allocation plot (.svg, or .png with matplotlib); "
                             f"default {DEFAULT_PLOT} ({churn_cli.DEFAULT_PLOT} with --churn)")
    parser.add_argument("--no-plot", action="store_true", help="write no plot")
    parser.add_argument("--list-policies", action="store_true",
                        help="list the policies and exit")


class _Progress:
    """A bar on a terminal; one line per finished run otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._label = ""
        self._last = -1

    def start(self, label: str) -> None:
        self._label = label
        self._last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self._tty:
            return
        pct = done * 100 // max(total, 1)
        if pct == self._last and done != total:
            return
        self._last = pct
        width = 30
        filled = width * done // max(total, 1)
        self._stream.write(f"\r{self._label:<34} [{'#' * filled}{'.' * (width - filled)}] "
                           f"{pct:3d}% {done}/{total} pods")
        self._stream.flush()

    def end_line(self) -> None:
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()

    def finish(self, result: RunResult) -> None:
        value = result.unallocated_gpu_pct_at_100
        shown = "n/a" if value is None else f"{value:.2f} %"
        if self._tty:
            self._stream.write("\n")
        self._stream.write(f"{self._label}: {shown} unallocated at 100 % arrived, "
                           f"{result.placed} placed, {result.failed} failed, "
                           f"{result.seconds:.1f} s\n")
        self._stream.flush()


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 2) if known else None


def _mean_curve(results: Sequence[RunResult]) -> list[tuple[int, float]]:
    by_pct: dict[int, list[float]] = {}
    for r in results:
        for pct, value in r.curve:
            by_pct.setdefault(pct, []).append(value)
    return [(pct, round(sum(v) / len(v), 2)) for pct, v in sorted(by_pct.items())]


def summarise(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One entry per policy: the means over its seeds."""
    out: list[dict[str, Any]] = []
    for name in dict.fromkeys(r.policy for r in results):
        runs = [r for r in results if r.policy == name]
        out.append({
            "policy": name, "seeds": [r.seed for r in runs],
            "pods": _mean([r.pods for r in runs]), "placed": _mean([r.placed for r in runs]),
            "failed": _mean([r.failed for r in runs]),
            "unallocated_gpu_pct_at_100": _mean([r.unallocated_gpu_pct_at_100 for r in runs]),
            "curve": [[p, v] for p, v in _mean_curve(runs)],
            "seconds": _mean([r.seconds for r in runs]),
        })
        if any(r.multi_gpu_pods is not None for r in runs):
            out[-1].update(multi_gpu_pods=_mean([r.multi_gpu_pods for r in runs]),
                           best_link_pct=_mean([r.best_link_pct for r in runs]))
        if any(r.isolated_pods is not None for r in runs):
            out[-1].update(isolated_pods=_mean([r.isolated_pods for r in runs]),
                           isolated_placed=_mean([r.isolated_placed for r in runs]))
    return out


def table(summary: Sequence[dict[str, Any]], paper: dict[str, published.Published] | None
          ) -> str:
    header = ["policy", "seeds", "unallocated % @100% arrived", "paper", "placed", "failed",
              "s/seed"]
    linked = any("best_link_pct" in s for s in summary)
    if linked:
        header[5:5] = ["multi-GPU", "best link %"]
    rows = []
    for s in summary:
        ref = paper.get(s["policy"]) if paper else None
        value = s["unallocated_gpu_pct_at_100"]
        row = [s["policy"], ",".join(str(x) for x in s["seeds"]),
               "n/a" if value is None else f"{value:.2f}",
               f"{ref.mean:.2f}" if ref else "-", f"{s['placed']:.0f}",
               f"{s['failed']:.0f}", f"{s['seconds']:.1f}"]
        if linked:
            best = s.get("best_link_pct")
            row[5:5] = [f"{s.get('multi_gpu_pods') or 0:.0f}",
                        "n/a" if best is None else f"{best:.2f}"]
        rows.append(row)
    return text_table.render(header, rows)


def _load(args: argparse.Namespace) -> tuple[list[TraceNode], list[TracePod], str]:
    nodes = load_nodes(args.nodes) if args.nodes else bundled.nodes()
    if args.pods:
        return nodes, load_pods(args.pods), published.workload_name(args.pods)
    variant = args.variant or bundled.DEFAULT_VARIANT
    return nodes, bundled.pods(variant), variant


def _write_json(target: str, workload: str, results: list[RunResult],
                summary: list[dict[str, Any]]) -> None:
    doc: dict[str, Any]
    if len(results) == 1:
        doc = results[0].to_json()
    else:
        doc = {"workload": workload, "runs": [r.to_json() for r in results], "mean": summary}
    text = json.dumps(doc, indent=1)
    if target == "-":
        print(text)
    else:
        Path(target).write_text(text + "\n", encoding="utf-8")


def _plot(target: str | None, workload: str, summary: list[dict[str, Any]],
          paper: dict[str, published.Published] | None) -> None:
    series = [plot.Series(s["policy"], [tuple(p) for p in s["curve"]]) for s in summary]
    if paper and "fgd" in paper:
        series.append(plot.Series("paper: FGD (mean of 10 seeds)",
                                  list(paper["fgd"].curve), dashed=True))
    out = plot.write(target or DEFAULT_PLOT, series,
                     f"GPU allocation vs arrived demand ({workload})")
    print(f"plot: {out}")


def _check(args: argparse.Namespace) -> None:
    if args.inflate < 0:
        raise ConfigError(f"--inflate {args.inflate}: must be 0 (no tuning) or positive")
    check_shape(args.topology)
    churn_cli.check(args)
    if args.hide_links and args.topology is None:
        raise ConfigError("--hide-links: give the nodes a --topology first")
    tenancy(args)


def tenancy(args: argparse.Namespace) -> Tenancy:
    """The namespaces, fault domains and users of the replay's pods (checked: ConfigError)."""
    return Tenancy.of(args)


def _describe(args: argparse.Namespace, workload: str, nodes: Sequence[TraceNode],
              pods: Sequence[TracePod]) -> None:
    """What was replayed, above the table."""
    print(f"workload: {workload} ({len(pods)} pods, {len(nodes)} nodes, "
          f"{sum(n.gpus for n in nodes)} GPUs), inflated to {args.inflate}x GPU capacity")
    if args.topology:
        print(f"topology: every node {args.topology}"
              + (", links hidden from the scheduler" if args.hide_links else ""))
    line = tenancy_line(args)
    if line:
        print(line)


def run(args: argparse.Namespace) -> int:
    if args.list_policies:
        for p in sim_policies.POLICIES.values():
            print(f"{p.name:<20} {p.description}")
        return 0
    _check(args)
    names = args.policy or (churn_cli.DEFAULT_POLICIES if args.churn
                            else [sim_policies.DEFAULT, sim_policies.BEST])
    chosen = [sim_policies.get(n) for n in dict.fromkeys(names)]
    named = [*(args.seed or []), *(parse_seeds(args.seeds) if args.seeds else [])]
    seeds = list(dict.fromkeys(named or [DEFAULT_SEED]))
    nodes, pods, workload = _load(args)
    if args.churn:
        return churn_cli.run(args, nodes, pods, workload, chosen=chosen, seeds=seeds,
                             progress=_Progress(sys.stderr))
    # The paper's numbers are for its nodes, its pod lists and 1.3x inflation only.
    paper = (published.load().get(workload) if not args.nodes and not args.pods
             and args.inflate == PAPER_INFLATE else None)
    progress = _Progress(sys.stderr)
    results: list[RunResult] = []
    for policy in chosen:
        for seed in seeds:
            progress.start(f"{policy.name} seed {seed}")
            result = replay(nodes, pods, policy, seed=seed, inflate=args.inflate,
                            progress=progress, topology=args.topology,
                            hide_links=args.hide_links, tenancy=tenancy(args))
            progress.finish(result)
            results.append(result)
    summary = summarise(results)
    _describe(args, workload, nodes, pods)
    print(table(summary, paper))
    if paper:
        print("paper (FGD artifact, means of seeds 42-51): " + ", ".join(
            f"{name} {result.mean:.2f}" for name, result in paper.items()))
    if args.json:
        _write_json(args.json, workload, results, summary)
    if not args.no_plot:
        _plot(args.plot, workload, summary, paper)
    print(f"peak memory: {peak_rss_mib():.0f} MiB", file=sys.stderr)
    return 0
