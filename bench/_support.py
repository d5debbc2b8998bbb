"""Helpers the bench scripts share.

A script runs as ``python bench/NAME.py``; Python puts ``bench/`` first on its
``sys.path``, which is how it finds this module, and the script then puts :data:`ROOT` in
front for the project and its test helpers (``tests`` is not installed).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: The repository.
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU time of a process so far, from /proc; with ``children``, that of
    the children it has reaped too."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    used = fields[11:15] if children else fields[11:13]
    return sum(int(f) for f in used) / os.sysconf("SC_CLK_TCK")


def sampled(nodes: Sequence[T], fraction: float) -> list[T]:
    """Every ``1/fraction``-th node (all of them at 1.0): a smaller cluster of the same mix,
    for a bench's smoke run in CI. A replay sizes its arrivals by the nodes' capacity, so
    the pods shrink with it."""
    if not 0 < fraction <= 1:
        raise SystemExit(f"--sample {fraction}: a fraction above 0, at most 1")
    step = max(1, round(1 / fraction))
    return list(nodes[::step])
