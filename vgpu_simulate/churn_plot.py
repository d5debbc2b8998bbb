"""The churn replay over time: allocated GPU share and pending GPU demand, one line per
policy, as an SVG written here (no dependency)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from vgpu.errors import ConfigError
from vgpu_simulate.churn_stats import interval
from vgpu_simulate.plot import PALETTE

DAY = 86400.0
#: Points per line: the trace changes state about twice per pod.
BINS = 300

Timeline = Sequence[tuple[float, float, float]]  # (seconds, allocated GPUs, pending GPUs)


@dataclass(frozen=True)
class Line:
    label: str
    points: Sequence[tuple[float, float, float]]  # (day, allocated %, pending GPUs)
    #: Over several seeds: per point, the 95 % interval of each figure,
    #: ``(allocated low, high, pending low, high)``; drawn as a band around the line.
    band: Sequence[tuple[float, float, float, float]] = ()


class _Run(Protocol):
    @property
    def policy(self) -> str: ...
    @property
    def seed(self) -> int: ...

    def binned(self) -> list[tuple[float, float, float]]: ...


def lines(runs: Sequence[_Run]) -> list[Line]:
    """One line per policy: its one seed, or the mean over its seeds with the 95 %
    interval per bin (the bins of a policy's seeds line up: the same horizon)."""
    out = []
    for name in dict.fromkeys(r.policy for r in runs):
        mine = [r for r in runs if r.policy == name]
        if len(mine) == 1:
            out.append(Line(f"{name} (seed {mine[0].seed})", mine[0].binned()))
            continue
        per_day: dict[float, list[tuple[float, float]]] = {}
        for r in mine:
            for day, allocated, pending in r.binned():
                per_day.setdefault(round(day, 9), []).append((allocated, pending))
        points, band = [], []
        for day, values in sorted(per_day.items()):
            alloc = interval([v[0] for v in values])
            pend = interval([v[1] for v in values])
            points.append((day, round(alloc.mean, 2), round(pend.mean, 2)))
            band.append((alloc.low, alloc.high, pend.low, pend.high))
        out.append(Line(f"{name} (mean of {len(mine)} seeds, 95 % band)", points, band))
    return out


def binned(timeline: Timeline, span: float, capacity_gpus: float,
           bins: int = BINS) -> list[tuple[float, float, float]]:
    """Time-weighted means per bin: ``(day, allocated % of the GPUs, pending GPUs)``."""
    if span <= 0 or not timeline or capacity_gpus <= 0:
        return []
    width = span / bins
    sums = [[0.0, 0.0, 0.0] for _ in range(bins)]
    for i, (start, alloc, pend) in enumerate(timeline):
        end = timeline[i + 1][0] if i + 1 < len(timeline) else span
        at = max(start, 0.0)
        while at < end:
            b = min(int(at / width), bins - 1)
            stop = min(end, (b + 1) * width) if b < bins - 1 else end
            part = stop - at
            if part <= 0:
                break
            sums[b][0] += part * alloc
            sums[b][1] += part * pend
            sums[b][2] += part
            at = stop
    return [((b + 0.5) * width / DAY, round(100 * s[0] / s[2] / capacity_gpus, 2),
             round(s[1] / s[2], 2)) for b, s in enumerate(sums) if s[2] > 0]


def write(path: str | Path, lines: Sequence[Line], title: str) -> Path:
    path = Path(path)
    if path.suffix.lower() != ".svg":
        raise ConfigError(f"--plot {path}: the churn plot is an .svg file")
    path.write_text(svg(lines, title), encoding="utf-8")
    return path


def _panel(lines: Sequence[Line], column: int, *, top: float, height: float, x_max: float,
           label: str, left: float, width: float) -> list[str]:
    y_max = max((p[column] for line in lines for p in line.points), default=0.0)
    y_max = max(1.0, y_max * 1.05)
    out = [f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" '
           f'stroke="#333333"/>',
           f'<text transform="translate(18 {top + height / 2}) rotate(-90)" '
           f'text-anchor="middle">{html.escape(label)}</text>']
    for k in range(5):
        v = y_max * k / 4
        yy = top + height * (1 - k / 4)
        out.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + width}" y2="{yy:.1f}" '
                   f'stroke="#eeeeee"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    for i, line in enumerate(lines):
        if line.band:
            lo, hi = (0, 1) if column == 1 else (2, 3)
            edge = ([(p[0], b[lo]) for p, b in zip(line.points, line.band, strict=True)]
                    + [(p[0], b[hi]) for p, b in zip(line.points, line.band, strict=True)][::-1])
            shape = " ".join(f"{left + width * d / x_max:.1f},"
                             f"{top + height * (1 - min(max(v, 0.0), y_max) / y_max):.1f}"
                             for d, v in edge)
            out.append(f'<polygon points="{shape}" fill="{PALETTE[i % len(PALETTE)]}" '
                       f'fill-opacity="0.18" stroke="none"/>')
        pts = " ".join(f"{left + width * p[0] / x_max:.1f},"
                       f"{top + height * (1 - p[column] / y_max):.1f}" for p in line.points)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{PALETTE[i % len(PALETTE)]}" '
                   f'stroke-width="1.4"/>')
    return out


def svg(lines: Sequence[Line], title: str, *, width: int = 900, height: int = 560) -> str:
    left, right, top = 70, 20, 40
    pw = width - left - right
    ph = (height - top - 90) / 2
    x_max = max((p[0] for line in lines for p in line.points), default=1.0) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">'
           f'{html.escape(title)}</text>']
    out += _panel(lines, 1, top=top, height=ph, x_max=x_max, label="allocated GPU (%)",
                  left=left, width=pw)
    lower = top + ph + 20
    out += _panel(lines, 2, top=lower, height=ph, x_max=x_max,
                  label="pending GPU demand (GPUs)", left=left, width=pw)
    # A load's window is minutes long, a whole trace weeks.
    unit, per_day = (("days", 1.0) if x_max >= 2 else ("hours", 24.0) if x_max * 24 >= 2
                     else ("minutes", 1440.0))
    for k in range(11):
        at = x_max * k / 10 * per_day
        xx = left + pw * k / 10
        out.append(f'<text x="{xx:.1f}" y="{lower + ph + 16:.1f}" text-anchor="middle">'
                   f'{at:.0f}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{lower + ph + 34:.1f}" text-anchor="middle">'
               f'trace time ({unit})</text>')
    for i, line in enumerate(lines):
        lx = left + 10 + 220 * (i % 4)
        ly = height - 14 - 16 * (i // 4)
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 20}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 26}" y="{ly}">{html.escape(line.label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
