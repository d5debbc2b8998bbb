"""What one scrape of the scheduler's /metrics costs on a large cluster.

    python bench/metrics.py [--gpus 40000] [--gpus-per-node 8] [--placed N] [--scrapes 5]

Builds the scale bench's cluster (``bench/_scale.py``: ``--gpus / --gpus-per-node``
nodes, ``--placed`` pods already bound, 1.25 a GPU by default), starts the scheduler on it
and renders its registry as the /metrics handler does (``generate_latest``), once with the
default settings (per-node sums) and once with ``scheduler.perGpuMetrics``. Per mode:
the body's bytes, its sample lines, the CPU time of the first scrape (every figure
computed) and the median of the following ones (nodes unchanged since the last scrape
reuse their sums), on one pinned CPU. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from typing import Any

from _support import ROOT

sys.path.insert(0, str(ROOT))

import _scale
from prometheus_client import generate_latest

from vgpu.config import Config, SchedulerConfig
from vgpu_scheduler.host.metrics import Metrics, State
from vgpu_scheduler.host.scheduler import Scheduler

NOW = 1_800_000_000.0


def clock() -> float:
    return NOW


def scrape(metrics: Metrics, scrapes: int) -> dict[str, Any]:
    cpu: list[float] = []
    body = b""
    for _ in range(scrapes):
        c0 = time.process_time()
        body = generate_latest(metrics.registry)
        cpu.append(time.process_time() - c0)
    lines = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {"bytes": len(body), "samples": lines, "cpu_ms_first": round(cpu[0] * 1e3, 1),
            "cpu_ms": round(statistics.median(cpu[1:] or cpu) * 1e3, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=40_000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--placed", type=int, default=None,
                        help="pods already bound (default 1.25 a GPU)")
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    args = parser.parse_args()
    if args.gpus < args.gpus_per_node or args.gpus_per_node < 3 or args.scrapes < 1:
        parser.error("need --gpus ≥ --gpus-per-node ≥ 3 and --scrapes ≥ 1")
    cpu = args.cpu if args.cpu is not None else sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {cpu})
    nodes = args.gpus // args.gpus_per_node
    placed = args.placed if args.placed is not None else args.gpus * 5 // 4
    cluster = _scale.build(_scale.nodes(nodes, args.gpus_per_node, NOW), args.gpus_per_node,
                           placed, 0.0)
    out: dict[str, Any] = {"gpus": nodes * args.gpus_per_node, "nodes": nodes,
                           "placed": placed, "cpu": cpu}
    for mode, per_gpu in (("per_node", False), ("per_gpu", True)):
        config = Config(scheduler=SchedulerConfig(per_gpu_metrics=per_gpu))
        sched = Scheduler(config, cluster, clock=clock)
        sched.pump()
        # As the scheduling loop does once synced (Scheduler.run): fold the listed pods
        # into their nodes and move what lives on out of the collector's way.
        sched.cache.update_snapshot(sched.snapshot)
        gc.collect()
        gc.freeze()
        out[mode] = scrape(Metrics(sched, State(leading=lambda: True)), args.scrapes)
        print(json.dumps({"mode": mode, **out[mode]}), flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
