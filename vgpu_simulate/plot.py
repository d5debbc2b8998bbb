"""Plots of allocation against arrived demand, one line per policy.

SVG is written here with no dependency, so ``vgpu simulate`` draws its plot on a fresh
install; PNG needs matplotlib (``pip install 'vgpu[plot]'``), which is too heavy to be a
dependency of a scheduler.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vgpu.errors import ConfigError

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]  # (arrived %, allocated %)
    dashed: bool = False


def write(path: str | Path, series: Sequence[Series], title: str) -> Path:
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".svg":
        path.write_text(svg(series, title), encoding="utf-8")
    elif suffix == ".png":
        _png(path, series, title)
    else:
        raise ConfigError(f"--plot {path}: use a .svg or .png file name")
    return path


def _png(path: Path, series: Sequence[Series], title: str) -> None:
    try:
        import matplotlib  # noqa: PLC0415 - optional, heavy, only for PNG

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise ConfigError(f"--plot {path}: PNG needs matplotlib (pip install 'vgpu[plot]'); "
                          "an .svg plot needs nothing") from None
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), dpi=120,
                             gridspec_kw={"width_ratios": [1, 1]})
    # Left: the whole replay; right: where the policies differ (the cluster filling up).
    for ax, (x0, x1, y0, y1) in zip(axes, ((0, 130, 0, 100), (80, 130, 80, 100)),
                                    strict=True):
        for i, s in enumerate(series):
            xs = [p[0] for p in s.points]
            ys = [p[1] for p in s.points]
            ax.plot(xs, ys, label=s.label, color=PALETTE[i % len(PALETTE)],
                    linestyle="--" if s.dashed else "-", linewidth=1.6)
        ax.plot([0, 100], [0, 100], color="#bbbbbb", linewidth=0.8, linestyle=":")
        ax.axvline(100, color="#999999", linewidth=0.8)
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_xlabel("arrived GPU demand (% of cluster GPUs)")
        ax.set_ylabel("allocated GPU (% of cluster GPUs)")
        ax.grid(True, linewidth=0.3)
    axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def svg(series: Sequence[Series], title: str, *, width: int = 800, height: int = 500) -> str:
    left, right, top, bottom = 70, 20, 40, 60
    pw, ph = width - left - right, height - top - bottom
    x_max, y_max = 130.0, 100.0

    def x(v: float) -> float:
        return left + pw * min(max(v, 0.0), x_max) / x_max

    def y(v: float) -> float:
        return top + ph * (1 - min(max(v, 0.0), y_max) / y_max)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">'
           f'{html.escape(title)}</text>']
    for tick in range(0, 131, 10):
        out.append(f'<line x1="{x(tick):.1f}" y1="{top}" x2="{x(tick):.1f}" y2="{top + ph}" '
                   f'stroke="#eeeeee"/>')
        out.append(f'<text x="{x(tick):.1f}" y="{top + ph + 18}" text-anchor="middle">'
                   f'{tick}</text>')
    for tick in range(0, 101, 10):
        out.append(f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + pw}" y2="{y(tick):.1f}" '
                   f'stroke="#eeeeee"/>')
        out.append(f'<text x="{left - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="#333333"/>')
    out.append(f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(100)}" y2="{y(100)}" stroke="#bbbbbb" '
               f'stroke-dasharray="2,3"/>')
    out.append(f'<line x1="{x(100)}" y1="{top}" x2="{x(100)}" y2="{top + ph}" '
               f'stroke="#999999"/>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 18}" text-anchor="middle">'
               f'arrived GPU demand (% of cluster GPUs)</text>')
    out.append(f'<text transform="translate(18 {top + ph / 2}) rotate(-90)" '
               f'text-anchor="middle">allocated GPU (% of cluster GPUs)</text>')
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in s.points)
        dash = ' stroke-dasharray="6,4"' if s.dashed else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                   f'stroke-width="1.8"{dash}/>')
        ly = top + ph - 20 - 18 * (len(series) - 1 - i)
        lx = left + pw - 250
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{color}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4}">{html.escape(s.label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
