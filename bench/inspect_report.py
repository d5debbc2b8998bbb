"""How long `vgpu inspect` takes to build and render its report on a large cluster.

    python bench/inspect_report.py [--nodes 1000] [--gpus 8] [--pods-per-gpu 4] [--rounds 7]

Builds the node and pod dicts of a cluster (every GPU holding ``--pods-per-gpu``
one-container pods, plus 10 % finished pods that must be skipped), then times
``inspect.build`` and both renderings. The API reads are not included: they are one
list of nodes and one of pods. Times are medians over ``--rounds``, in milliseconds.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vgpu.codecs import encode_heartbeat
from vgpu_kubectl import inspect, inspect_render


def cluster(nodes: int, gpus: int, per_gpu: int) -> tuple[list[dict[str, Any]],
                                                           list[dict[str, Any]]]:
    now = encode_heartbeat(dt.datetime.now(dt.UTC))
    node_objs, pod_objs = [], []
    for n in range(nodes):
        name = f"node-{n}"
        devices = [{"uuid": f"GPU-{n}-{g}", "index": g, "model": "NVIDIA A100-SXM4-80GB",
                    "memory_mib": 81920, "cores": 100, "split": 10, "numa": g // 4,
                    "healthy": True} for g in range(gpus)]
        node_objs.append({"metadata": {"name": name, "annotations": {
            "vgpu.io/node-gpus": json.dumps({"version": 1, "devices": devices}),
            "vgpu.io/node-heartbeat": now}}})
        for g in range(gpus):
            for p in range(per_gpu + (1 if p_finished(n, g) else 0)):
                assignment = {"version": 1, "node": name, "containers": {"main": [
                    {"uuid": f"GPU-{n}-{g}", "memory_mib": 8192, "cores": 20}]}}
                phase = "Succeeded" if p == per_gpu else "Running"
                pod_objs.append({
                    "metadata": {"name": f"p-{n}-{g}-{p}", "namespace": "ml", "annotations": {
                        "vgpu.io/assignment": json.dumps(assignment),
                        "vgpu.io/bind-phase": "success"}},
                    "spec": {"nodeName": name, "schedulerName": "vgpu-scheduler"},
                    "status": {"phase": phase}})
    return node_objs, pod_objs


def p_finished(n: int, g: int) -> bool:
    return (n * 31 + g) % 10 == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods-per-gpu", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    nodes, pods = cluster(args.nodes, args.gpus, args.pods_per_gpu)
    now = dt.datetime.now(dt.UTC)
    times: dict[str, list[float]] = {"build": [], "table": [], "table_details": [], "json": []}
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        report = inspect.build(nodes, pods, now=now, heartbeat_expiry_seconds=180,
                               scheduler_name="vgpu-scheduler")
        t1 = time.perf_counter()
        inspect_render.render_table(report)
        t2 = time.perf_counter()
        inspect_render.render_table(report, details=True)
        t3 = time.perf_counter()
        inspect_render.render_json(report)
        t4 = time.perf_counter()
        for key, value in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            value_ms = value * 1000
            times[key].append(value_ms)
    assert report.totals.tasks == args.nodes * args.gpus * args.pods_per_gpu
    result = {"nodes": args.nodes, "gpus": args.nodes * args.gpus, "pods": len(pods),
              **{f"{k}_ms_median": round(statistics.median(v), 1) for k, v in times.items()}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
