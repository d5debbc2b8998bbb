"""The two renderings of a :class:`vgpu_kubectl.why.Report`: text for people, JSON for scripts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from vgpu import times
from vgpu_kubectl.why import Report

_W = 13


def _row(label: str, text: str) -> str:
    return f"  {label + ':':<{_W}} {text}"


def _more(text: str) -> str:
    return f"  {'':<{_W}} {text}"


def _placement(report: Report) -> list[str]:
    """Where the pod went: node, GPUs and how they are linked, the Allocate answer."""
    lines = []
    if report.node is not None:
        lines.append(_row("Node", f"{report.node} (bound {report.bind_time or '?'})"))
    for g in report.gpus:
        index = "?" if g.index is None else g.index
        lines.append(_row("GPU", f"{g.container}: GPU {index} {g.uuid} ({g.model}) "
                                 f"{g.memory_mib} MiB, {g.cores}% cores"))
    lines += [_row("Links", line) for line in report.links]
    if report.allocation is not None:
        a = report.allocation
        after = ("" if a.bind_to_allocate_seconds is None
                 else f", {a.bind_to_allocate_seconds:.3f} s after binding")
        lines.append(_row("Allocate", f"answered {a.time:%Y-%m-%dT%H:%M:%SZ}{after}"))
        lines.append(_row("Isolation", f"{a.isolation.mode}: {a.isolation.detail}"))
    if report.node is not None:
        lines.append(_row("Memory use", "not reported: no node agent measures a container's "
                                        "GPU memory yet"))
    return lines


def render_text(report: Report) -> str:
    lines = [f"Pod {report.namespace}/{report.name}: {report.state}",
             _row("Summary", report.summary), *(_row("Quota", q) for q in report.quota)]
    if report.admission is not None:
        lines.append(_row("Admission", "mutated by the vgpu webhook:"))
        lines += [_more(change) for change in report.admission]
    elif report.phase is not None:
        lines.append(_row("Admission", "not changed by the vgpu webhook"))
    if report.gates:
        lines.append(_row("Gates", ", ".join(report.gates)))
    if report.fault_domain is not None:
        lines.append(_row("Fault domain", report.fault_domain))
    if report.mps_user is not None:
        lines.append(_row("MPS user", report.mps_user))
    if report.last_attempt is not None:
        e = report.last_attempt
        lines.append(_row("Last attempt", f"{e.time} (x{e.count}) {e.message}"))
    if report.closest:
        lines.append(_row("Closest", "nodes nearest to fitting its GPUs now:"))
        for fit in report.closest:
            verdict = "fits now" if fit.fits else (
                f"{fit.fitting}/{fit.containers} GPU containers fit")
            lines.append(_more(f"{fit.node}: {verdict}"))
            lines += [_more(f"  {short}") for short in fit.short]
    lines += _placement(report)
    for e in report.events:
        lines.append(_row("Event", f"{e.time} {e.type} {e.reason} ({e.component}): "
                                   f"{e.message.splitlines()[0] if e.message else ''}"))
    lines += [_row("Warning", w) for w in report.warnings]
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return times.format_micro(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def render_json(report: Report) -> str:
    body = _plain(dataclasses.asdict(report))
    body["closest"] = [{**fit, "fits": fit["fitting"] == fit["containers"]}
                       for fit in body["closest"]]
    return json.dumps({"version": 1, **body}, indent=2)
