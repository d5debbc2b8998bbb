"""What a round of the scheduler's cache reconciler costs on a large cluster (issue 50).

    python bench/reconcile.py [--nodes 15000] [--placed 150000] [--rounds 5] [--cpu N]

The cluster is ``bench/scheduling.py --nodes``'s (``_scale.py``: nodes of 8 GPUs, pods
bound as the scheduler and the agent leave them); a scheduler cold-starts on it. Then
rounds of ``Scheduler.reconcile`` (what runs every ``scheduler.cacheReconcileSeconds`` and
after every re-list): the first, which audits every node's totals (all changed since the
cold start); the steady ones, nothing changed; and ones after ``--churn`` pods were bound
and deleted between rounds. Each round must find no drift. Pinned to one CPU (``--cpu``,
default the last). The last line is one JSON object: wall and CPU seconds per round
(medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from _support import ROOT

sys.path.insert(0, str(ROOT))

from _scale import build, nodes, placed_pod

from vgpu import logs
from vgpu.config import Config
from vgpu_scheduler.host.scheduler import Scheduler


def timed(sched: Scheduler) -> tuple[float, float]:
    """Wall and CPU seconds of one round."""
    start, cpu = time.perf_counter(), time.process_time()
    drift = sched.reconcile()
    took = (time.perf_counter() - start, time.process_time() - cpu)
    if drift:
        raise SystemExit(f"the reconciler found drift in a cache that has none: {drift[:3]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=15_000)
    parser.add_argument("--placed", type=int, default=150_000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--churn", type=int, default=200,
                        help="pods bound and deleted between the churn rounds")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    args = parser.parse_args()
    cpu = args.cpu if args.cpu is not None else sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {cpu})
    logs.setup("warning")
    node_objs = nodes(args.nodes, args.gpus_per_node, time.time())
    cluster = build(node_objs, args.gpus_per_node, args.placed, 0.0)
    sched = Scheduler(Config(), cluster)
    sched.pump()
    sched.cache.update_snapshot(sched.snapshot)
    first = timed(sched)
    steady = [timed(sched) for _ in range(args.rounds)]
    churned = []
    for r in range(args.rounds):
        names = []
        for k in range(args.churn):
            node = node_objs[(r * args.churn + k) % len(node_objs)]["metadata"]["name"]
            pod = placed_pod(10_000_000 + r * args.churn + k, node, args.gpus_per_node - 1,
                             0.0)
            names.append(cluster.create("pods", pod)["metadata"]["name"])
        sched.pump()
        for name in names[: len(names) // 2]:
            cluster.delete("pods", name, "default")
        sched.pump()
        churned.append(timed(sched))
    out: dict[str, object] = {"nodes": args.nodes, "placed": args.placed, "cpu": cpu,
                              "churn": args.churn}
    for name, rounds in (("first", [first]), ("steady", steady), ("churn", churned)):
        out[f"{name}_round_s"] = round(statistics.median(r[0] for r in rounds), 3)
        out[f"{name}_round_cpu_s"] = round(statistics.median(r[1] for r in rounds), 3)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
