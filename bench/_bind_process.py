"""bench/bind.py's measuring of processes: RSS, CPU, a py-spy profile, the --trace lines,
and a thread pool for the creates."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _bind_cluster import Scheduler


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


@contextlib.contextmanager
def profiling(pid: int, out: Path) -> Iterator[None]:
    """py-spy (a dev dependency) sampling ``pid`` until the block ends."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "200", "--gil", "--format",
                             "raw", "--output", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the burst starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def parallel(threads: int, fn: Any, items: list[Any]) -> None:
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            pass


def trace(sched: Scheduler, sent: dict[str, float], done: Any) -> None:
    """Queue lengths and counts every second, on stderr (--trace). Reads the scrape as
    text: parsing every per-GPU series each time would cost more than the scheduler."""
    t0 = time.time()
    wanted = ("vgpu_scheduler_pending_pods{", 'vgpu_scheduler_schedule_attempts_total{result="s',
              'vgpu_scheduler_bindings_total{result="su')
    while not done.wait(1.0):
        with contextlib.suppress(OSError), urllib.request.urlopen(
                f"http://127.0.0.1:{sched.port}/metrics", timeout=10) as resp:
            lines = [line.split(" ") for line in resp.read().decode().splitlines()
                     if line.startswith(wanted)]
            figures = " ".join(f"{name.split('_', 2)[2]}={float(v):g}" for name, v in lines)
            print(f"{time.time() - t0:6.2f}s sent={len(sent)} {figures}", file=sys.stderr,
                  flush=True)
