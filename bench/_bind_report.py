"""The figures of ``bench/bind.py``: one run's, the medians over runs, and the side by side
with kube-scheduler (``--against kube-scheduler``) with its ratios and targets."""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

#: The side by side's phases: (label, scheduler, workload).
KUBE, VGPU = "kube-scheduler", "vgpu-scheduler"
PHASES = (("kube_scheduler_whole", KUBE, "whole"), ("vgpu_whole", VGPU, "whole"),
          ("vgpu_fractional", VGPU, "fractional"))
#: The issue's targets (#16): rates against kube-scheduler's on whole GPUs, p99 no worse,
#: and the scheduler's CPU per pod.
TARGET_WHOLE_RATE, TARGET_FRACTIONAL_RATE, TARGET_CPU_MS = 1.0, 0.9, 1.5


def figures(*, pods: int, nodes: int, start: float, created: float, end: float,
            latencies: Sequence[float], cpu: Mapping[str, float], load: float,
            metrics: Mapping[str, float]) -> dict[str, Any]:
    wall = end - start
    cores = os.cpu_count() or 1
    return {
        "pods": pods, "nodes": nodes,
        "pods_per_s": round(pods / wall, 1),
        "created_per_s": round(pods / (created - start), 1),
        "create_to_bound_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "create_to_bound_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 1),
        "create_to_bound_max_ms": round(latencies[-1] * 1000, 1),
        "window_s": round(wall, 2),
        "cpu_share": {name: round(sec / (wall * cores), 3) for name, sec in cpu.items()},
        "cpu_ms_per_pod": {name: round(sec * 1000 / pods, 2) for name, sec in cpu.items()},
        "cpu_bound_ceiling_pods_per_s": round(cores * pods / sum(cpu.values()), 1),
        "cores": cores, "loadavg_1m_before": round(load, 2),
        "scheduler": {
            "attempts": metrics.get("vgpu_scheduler_schedule_attempts_total{result=scheduled}"),
            "unschedulable": metrics.get(
                "vgpu_scheduler_schedule_attempts_total{result=unschedulable}"),
            "bind_conflicts": metrics.get("vgpu_scheduler_bindings_total{result=conflict}"),
            "permit_waits": metrics.get("vgpu_scheduler_permit_waits_total"),
            "events_sent": metrics.get("vgpu_scheduler_events_total{outcome=sent}"),
            "events_dropped": metrics.get("vgpu_scheduler_events_total{outcome=dropped}"),
        } if metrics else None,
    }


_KEYS = ("pods_per_s", "created_per_s", "create_to_bound_p50_ms", "create_to_bound_p99_ms",
         "create_to_bound_max_ms")


def summarise(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians over the runs."""
    summary: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in _KEYS}
    for key in ("cpu_share", "cpu_ms_per_pod"):
        summary[key] = {name: statistics.median(r[key][name] for r in runs)
                        for name in runs[0][key]}
    summary["cpu_bound_ceiling_pods_per_s"] = statistics.median(
        r["cpu_bound_ceiling_pods_per_s"] for r in runs)
    summary["loadavg_1m_before"] = [r["loadavg_1m_before"] for r in runs]
    for key in ("scheduler_startup_s", "scheduler_rss_mb"):
        if all(key in r for r in runs):
            summary[key] = statistics.median(r[key] for r in runs)
    if all("writes_per_pod" in r for r in runs):
        kinds = sorted({k for r in runs for k in r["writes_per_pod"]})
        summary["writes_per_pod"] = {k: statistics.median(r["writes_per_pod"].get(k, 0.0)
                                                          for r in runs) for k in kinds}
        summary["writes_per_pod_total"] = statistics.median(
            r["writes_per_pod_total"] for r in runs)
    return summary


def _brief(run: Mapping[str, Any]) -> dict[str, float]:
    brief = {"pods_per_s": run["pods_per_s"], "p50_ms": run["create_to_bound_p50_ms"],
             "p99_ms": run["create_to_bound_p99_ms"],
             "scheduler_cpu_ms_per_pod": run["cpu_ms_per_pod"]["scheduler"]}
    for key in ("scheduler_startup_s", "scheduler_rss_mb"):
        if key in run:
            brief[key] = run[key]
    if "writes_per_pod_total" in run:
        # Everything written for a pod but the create: the scheduler's Binding and Events,
        # the agents' patches, the Lease's share.
        brief["writes_per_pod"] = round(run["writes_per_pod_total"]
                                        - run["writes_per_pod"].get("POST pods", 0.0), 3)
    return brief


def _ratios(phases: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    kube, whole, frac = (phases[label] for label, _, _ in PHASES)
    return {
        "whole_pods_per_s": round(whole["pods_per_s"] / kube["pods_per_s"], 3),
        "whole_p99": round(whole["p99_ms"] / kube["p99_ms"], 3),
        "fractional_pods_per_s": round(frac["pods_per_s"] / kube["pods_per_s"], 3),
        "whole_scheduler_cpu": round(whole["scheduler_cpu_ms_per_pod"]
                                     / kube["scheduler_cpu_ms_per_pod"], 3),
    }


def side_by_side(runs: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per phase the medians over runs of pods/s, p50, p99 and the scheduler's CPU per pod;
    the ratios (medians of each run's ratios: one run's phases share its conditions) and
    whether each target is met."""
    briefs = [{label: _brief(run[label]) for label, _, _ in PHASES} for run in runs]
    out: dict[str, Any] = {
        label: {k: statistics.median(b[label][k] for b in briefs) for k in briefs[0][label]}
        for label, _, _ in PHASES}
    per_run = [_ratios(b) for b in briefs]
    ratios = {k: statistics.median(r[k] for r in per_run) for k in per_run[0]}
    out["ratios"] = ratios
    out["targets_met"] = {
        "whole_pods_per_s": ratios["whole_pods_per_s"] >= TARGET_WHOLE_RATE,
        "whole_p99": ratios["whole_p99"] <= 1.0,
        "fractional_pods_per_s": ratios["fractional_pods_per_s"] >= TARGET_FRACTIONAL_RATE,
        "scheduler_cpu_ms_per_pod": max(out["vgpu_whole"]["scheduler_cpu_ms_per_pod"],
                                        out["vgpu_fractional"]["scheduler_cpu_ms_per_pod"])
        <= TARGET_CPU_MS,
    }
    return out
