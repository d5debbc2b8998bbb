"""The figures of ``bench/scheduler_perf.py``: one run's (a workload under one scheduler),
the side by side with its ratios and the issue's targets (#44), and the markdown table."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

KUBE, VGPU = "kube-scheduler", "vgpu-scheduler"
SCHEDULERS = (KUBE, VGPU)


def figures(*, sent: Mapping[str, float], bound: Mapping[str, float],
            cpu: Mapping[str, float], load: float) -> dict[str, Any]:
    """pods/s and create→bound latencies of the measured pods (``sent``: when each create
    was sent; ``bound``: when the watch first showed it bound), the CPU of each process
    over that window per pod."""
    latencies = sorted(bound[k] - sent[k] for k in sent)
    pods = len(latencies)
    window = max(bound[k] for k in sent) - min(sent.values())
    return {
        "pods": pods,
        "pods_per_s": round(pods / window, 1) if window > 0 else None,
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p99_ms": round(latencies[int(0.99 * (pods - 1))] * 1000, 1),
        "max_ms": round(latencies[-1] * 1000, 1),
        "window_s": round(window, 2),
        "cpu_ms_per_pod": {name: round(sec * 1000 / pods, 2) for name, sec in cpu.items()},
        "loadavg_1m_before": round(load, 2),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _worst_anti(run: Mapping[str, Any]) -> int | None:
    rows = run.get("soft", {}).get("preferred_anti_affinity")
    return max(r["max_per_domain"] for r in rows) if rows else None


def side_by_side(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One workload under both schedulers: the ratios vgpu/kube and the targets: no hard
    rule broken, pods/s ≥ 1.0× kube-scheduler's with p99 no worse, and preferred
    anti-affinity's most matching pods in one domain ≤ kube-scheduler's + 1."""
    out: dict[str, Any] = dict(runs)
    if KUBE not in runs or VGPU not in runs:
        return out
    kube, vgpu = runs[KUBE], runs[VGPU]
    out["ratios"] = {"pods_per_s": _ratio(vgpu.get("pods_per_s"), kube.get("pods_per_s")),
                     "p99": _ratio(vgpu.get("p99_ms"), kube.get("p99_ms"))}
    met = {"completed": "error" not in vgpu,
           "no_hard_rule_broken": vgpu["hard_total"] == 0,  # (None: not checked)
           "pods_per_s": (out["ratios"]["pods_per_s"] or 0) >= 1.0,
           "p99": out["ratios"]["p99"] is not None and out["ratios"]["p99"] <= 1.0}
    mine, theirs = _worst_anti(vgpu), _worst_anti(kube)
    if mine is not None and theirs is not None:
        met["preferred_anti_affinity"] = mine <= theirs + 1
    out["targets_met"] = met
    return out


def summary(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Across workloads: the hard rules each scheduler broke, and which workloads miss a
    target."""
    broken = {s: {w: r[s]["hard_total"] for w, r in results.items()
                  if s in r and r[s]["hard_total"]} for s in SCHEDULERS}
    failed = {s: {w: r[s]["error"] for w, r in results.items() if "error" in r.get(s, {})}
              for s in SCHEDULERS}
    missed = {w: [t for t, ok in r["targets_met"].items() if not ok]
              for w, r in results.items() if "targets_met" in r}
    return {"hard_rules_broken": broken, "errors": {s: e for s, e in failed.items() if e},
            "targets_missed": {w: t for w, t in missed.items() if t},
            "targets_met_everywhere": bool(missed) and not any(missed.values())}


def soft_brief(soft: Mapping[str, Any]) -> str:
    """The measure that matters for the workload's soft rule, in a few words."""
    parts = []
    for r in soft.get("preferred_anti_affinity", ()):
        parts.append(f"anti: max {r['max_per_domain']}/{r['key'].rsplit('/', 1)[-1]} "
                     f"(even {r['even']}), {r['alone_share']:.0%} alone")
    for r in soft.get("preferred_affinity", ()):
        together = 1 - r["alone_share"]
        parts.append(f"affinity: {together:.0%} together, max {r['max_per_domain']}")
    for r in soft.get("schedule_anyway_spread", ()):
        parts.append(f"spread skew {r['skew']}")
    if not parts:
        parts.append(f"{soft.get('nodes_used', 0)} nodes, max {soft.get('pods_per_node_max', 0)}"
                     "/node")
    return "; ".join(parts)


def _cell(run: Mapping[str, Any] | None, key: str, scale: float = 1.0) -> str:
    if run is None or run.get(key) is None:
        return "—"
    return f"{run[key] * scale:.{2 if scale != 1.0 else 1}f}"


def table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown: per workload both schedulers' pods/s and p99, the ratios, hard rules
    broken and the soft measure."""
    lines = ["| workload | pods | kube pods/s | vgpu pods/s | × | kube p99 s | vgpu p99 s | × "
             "| hard rules broken (kube / vgpu) | soft rule (kube / vgpu) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        kube, vgpu = r.get(KUBE), r.get(VGPU)
        ratios = r.get("ratios", {})
        pods = (vgpu or kube or {}).get("pods", "—")
        hard = " / ".join("—" if x is None or x["hard_total"] is None else str(x["hard_total"])
                          for x in (kube, vgpu))
        soft = " / ".join(soft_brief(x["soft"]) if x else "—" for x in (kube, vgpu))
        lines.append(
            f"| {name} | {pods} | {_cell(kube, 'pods_per_s')} | {_cell(vgpu, 'pods_per_s')} "
            f"| {ratios.get('pods_per_s') or '—'} | {_cell(kube, 'p99_ms', 0.001)} "
            f"| {_cell(vgpu, 'p99_ms', 0.001)} | {ratios.get('p99') or '—'} | {hard} | {soft} |")
    return "\n".join(lines)


def brief_line(workload: str, scheduler: str, run: Mapping[str, Any]) -> str:
    """The one-line progress report after each run."""
    p99 = run.get("p99_ms")
    return (f"{workload} {scheduler}: {run.get('pods', 0)} pods, {run.get('pods_per_s')} "
            f"pods/s, p99 {'—' if p99 is None else f'{p99 / 1000:.2f} s'}, hard rules broken "
            f"{'—' if run['hard_total'] is None else run['hard_total']}, "
            f"{soft_brief(run['soft'])}"
            + (f"; ERROR {run['error']}" if "error" in run else ""))
