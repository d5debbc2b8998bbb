"""Benchmark ``vgpu webhook``: admissions per second and latency over TLS, server on one core.

Starts the real command (``python -m vgpu.cli webhook``) pinned to one CPU, with a fresh
CA and serving certificate, and drives ``/mutate`` (pod CREATE) and ``/validate`` (pod
UPDATE) over TLS from the other CPUs, each with:

- closed loop, 16 and 64 concurrent clients (one keep-alive connection each):
  throughput and p50/p99 latency;
- open loop, 500 requests/s offered (requests start on schedule whether or not earlier
  ones finished, on a pool of 64 keep-alive connections; latency counts from the
  scheduled start, so a stall is not hidden): p50/p99.

The load generator is a minimal HTTP/1.1 client on asyncio's TLS (``--client raw``, the
default) because aiohttp's client costs more CPU per request than the server and the
client has one core on a two-core machine; ``--client aiohttp`` uses aiohttp's client.

Every CREATE is a realistic Deployment pod (about 6 KB of AdmissionReview JSON, three
containers, one asking for ``nvidia.com/gpumem`` and cores without a count), so each
answer is a real mutation: schedulerName and ``nvidia.com/gpu: 1``. Every UPDATE carries
that pod twice (old and new, placed, with vgpu's annotations, about 13 KB), as ``/validate``
gets every pod update on Kubernetes 1.20 (no matchConditions there): ``update_agent`` is
the node agent's ``bind-phase`` patch (its service account, answered first), and
``update_tenant`` a tenant's relabelling (the annotations compared). The server runs with
its default logging (JSON, info level) into a file.

Besides requests/s and latency, each phase reports the server's CPU time per request
(from /proc): on a shared machine requests/s depends on what else runs, CPU time per
request much less so. ``stages`` gives best-of-N microseconds of the pure stages.

Prints one JSON object on the last line. Usage::

    python bench/admission.py [--duration 5] [--server-cpu 0] [--rate 500] [--client raw]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.request
from pathlib import Path
from typing import Any

from _admission_traffic import (
    AiohttpClient,
    RawClient,
    closed_loop,
    open_loop,
    review_body,
    update_body,
)
from _support import ROOT, cpu_seconds, free_port

sys.path.insert(0, str(ROOT))

# The bench runs from the repository: the test CA helper and the webhook's own modules.
from tests.webhook import certs
from vgpu.config import Config
from vgpu_webhook.gpus import ClusterGpus
from vgpu_webhook.mutate import decide
from vgpu_webhook.review import answer, parse
from vgpu_webhook.validate import validate

AGENT = Config().webhook.annotation_writers[1]
TENANT = "alice"


def stage_costs(body: bytes, updates: dict[str, bytes]) -> dict[str, float]:
    """Best-of-N microseconds of each pure stage of one admission, in this process."""
    config, gpus = Config(), ClusterGpus()
    review = parse(body)
    decision = decide(review.request, config, gpus)
    stages = {"parse_us": lambda: parse(body),
              "decide_us": lambda: decide(review.request, config, gpus),
              "answer_us": lambda: answer(review.uid, decision)}
    for name, update in updates.items():
        request = parse(update).request
        stages[f"{name}_parse_us"] = lambda u=update: parse(u)
        stages[f"{name}_validate_us"] = lambda r=request: validate(r, config)
    return {name: round(min(timeit.repeat(stage, number=200, repeat=15)) / 200 * 1e6, 1)
            for name, stage in stages.items()}


def measured(pid: int, run: Any) -> dict[str, Any]:
    """Run one load phase and add the server's CPU time per request.

    On a shared machine requests/s depends on what else runs; CPU time per request says
    what the server itself costs, and 1 / that is what one whole core would serve.
    """
    before = cpu_seconds(pid)
    result: dict[str, Any] = asyncio.run(run)
    used = cpu_seconds(pid) - before
    result["server_cpu_s"] = round(used, 2)
    if result["requests"]:
        per = used / result["requests"]
        result["server_cpu_us_per_request"] = round(per * 1e6, 1)
        result["one_core_capacity_rps"] = round(1 / per) if per else None
    return result


def phases(pid: int, client: Any, args: argparse.Namespace, label: str) -> dict[str, Any]:
    """Closed loops at 16 and 64 clients, then the open loop, on fresh clients each."""
    out: dict[str, Any] = {}
    for concurrency in (16, 64):
        out[f"closed_c{concurrency}"] = measured(
            pid, closed_loop(client(), concurrency, args.duration))
        print(f"{label} closed loop c={concurrency}: {out[f'closed_c{concurrency}']}",
              file=sys.stderr)
    out["open_loop"] = measured(pid, open_loop(client(), args.rate, args.duration))
    print(f"{label} open loop {args.rate}/s: {out['open_loop']}", file=sys.stderr)
    return out


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the webhook exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the webhook did not become ready")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--server-cpu", type=int, default=0, help="CPU the server is pinned to")
    parser.add_argument("--rate", type=float, default=500.0, help="open-loop offered rate")
    parser.add_argument("--client", choices=("raw", "aiohttp"), default="raw",
                        help="load generator: a minimal HTTP/1.1 protocol (default; cheap "
                             "enough that the server is what is measured) or aiohttp's client")
    args = parser.parse_args()

    cpus = sorted(os.sched_getaffinity(0))
    client_cpus = set(cpus) - {args.server_cpu} or set(cpus)
    with tempfile.TemporaryDirectory(prefix="vgpu-bench-") as tmp_name:
        tmp = Path(tmp_name)
        ca = certs.authority()
        ca_file = ca.write(tmp / "ca.crt")
        certs.serving(ca, tmp / "tls.crt", tmp / "tls.key")
        port, metrics_port = free_port(), free_port()
        log_file = (tmp / "webhook.log").open("wb")
        server_cpu = args.server_cpu
        process = subprocess.Popen(
            [sys.executable, "-m", "vgpu.cli", "webhook", "--cert-file", str(tmp / "tls.crt"),
             "--key-file", str(tmp / "tls.key"), "--port", str(port),
             "--metrics-port", str(metrics_port), "--address", "127.0.0.1"],
            cwd=ROOT, stdout=log_file, stderr=log_file,
            env={**os.environ, "KUBERNETES_SERVICE_HOST": "", "KUBECONFIG": "",
                 "HOME": tmp_name, "VGPU_LOG_FORMAT": "json",
                 # Its readiness, read with no token: plain HTTP on the loopback address.
                 "VGPU_METRICS_SERVER__INSECURE": "true"})
        # One core for the server (threads it starts later inherit it).
        os.sched_setaffinity(process.pid, {server_cpu})
        try:
            wait_ready(metrics_port, process)
            os.sched_setaffinity(0, client_cpus)
            tls = ssl.create_default_context(cafile=str(ca_file))
            body = review_body()
            updates = {"update_agent": update_body(AGENT), "update_tenant": update_body(TENANT)}
            make = RawClient if args.client == "raw" else AiohttpClient
            result: dict[str, Any] = {
                "bench": "webhook", "client": args.client, "body_bytes": len(body),
                "update_body_bytes": len(updates["update_agent"]),
                "server_cpu": server_cpu,
                "client_cpus": sorted(client_cpus), "duration_s": args.duration,
                "loadavg_before": round(os.getloadavg()[0], 2),
                "stages": stage_costs(body, updates),
            }
            result.update(phases(process.pid, lambda: make(port, body, tls), args, "create"))
            for name, update in updates.items():
                result[name] = phases(
                    process.pid, lambda u=update: make(port, u, tls, "/validate"), args, name)
            result["rps_max"] = max(result["closed_c16"]["rps"], result["closed_c64"]["rps"])
            result["update_rps_max"] = {name: max(result[name]["closed_c16"]["rps"],
                                                  result[name]["closed_c64"]["rps"])
                                        for name in updates}
            result["targets"] = {
                "rps_ge_3000": result["rps_max"] >= 3000,
                "open_loop_p99_le_10ms": result["open_loop"]["p99_ms"] <= 10.0,
                "update_open_loop_p99_le_10ms": all(
                    result[name]["open_loop"]["p99_ms"] <= 10.0 for name in updates),
            }
            result["loadavg_after"] = round(os.getloadavg()[0], 2)
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
            log_file.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
