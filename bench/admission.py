"""Benchmark ``vgpu webhook``: admissions per second and latency over TLS, server on one core.

Starts the real command (``python -m vgpu.cli webhook``) pinned to one CPU, with a fresh
CA and serving certificate, and drives ``/mutate`` over TLS from the other CPUs:

- closed loop, 16 and 64 concurrent clients (one keep-alive connection each):
  throughput and p50/p99 latency;
- open loop, 500 requests/s offered (requests start on schedule whether or not earlier
  ones finished, on a pool of 64 keep-alive connections; latency counts from the
  scheduled start, so a stall is not hidden): p50/p99.

The load generator is a minimal HTTP/1.1 client on asyncio's TLS (``--client raw``, the
default) because aiohttp's client costs more CPU per request than the server and the
client has one core on a two-core machine; ``--client aiohttp`` uses aiohttp's client.

Every request is a realistic Deployment pod (about 6 KB of AdmissionReview JSON, three
containers, one asking for ``nvidia.com/gpumem`` and cores without a count), so each
answer is a real mutation: schedulerName and ``nvidia.com/gpu: 1``. The server runs with
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
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The bench runs from the repository: the test CA helper and the webhook's own modules.
from tests.webhook import certs  # noqa: E402
from vgpu.config import Config  # noqa: E402
from webhook.gpus import ClusterGpus  # noqa: E402
from webhook.mutate import decide  # noqa: E402
from webhook.review import answer, parse  # noqa: E402


def realistic_pod() -> dict[str, Any]:
    """A pod as the API server sends it for a Deployment replica: defaulted fields and all."""
    def container(name: str, limits: dict[str, str]) -> dict[str, Any]:
        return {
            "name": name, "image": f"registry.example.com/team/{name}:1.4.2",
            "imagePullPolicy": "IfNotPresent",
            "command": ["python", "-m", name], "args": ["--port", "8080", "--verbose"],
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(8)],
            "resources": {"limits": limits, "requests": {"cpu": "500m", "memory": "1Gi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data"},
                             {"name": "kube-api-access-x7k2p", "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                              "initialDelaySeconds": 10, "timeoutSeconds": 1, "periodSeconds": 10,
                              "successThreshold": 1, "failureThreshold": 3},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
        }

    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "generateName": "trainer-7c9f5b8d4-", "namespace": "ml-team",
            "labels": {"app": "trainer", "pod-template-hash": "7c9f5b8d4", "tier": "gpu"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "trainer-7c9f5b8d4", "uid": "a1b2c3d4-0000-4000-8000-1",
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "volumes": [{"name": "data", "emptyDir": {}},
                        {"name": "kube-api-access-x7k2p", "projected": {"sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607,
                                                     "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt",
                                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}}],
                            "defaultMode": 420}}],
            "containers": [
                container("trainer", {"cpu": "4", "memory": "16Gi",
                                      "nvidia.com/gpumem": "8000", "nvidia.com/gpucores": "50"}),
                container("metrics", {"cpu": "200m", "memory": "256Mi"}),
                container("uploader", {"cpu": "200m", "memory": "256Mi"}),
            ],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "serviceAccount": "default", "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def review_body() -> bytes:
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0a1b2c3d-4e5f-6789-abcd-ef0123456789",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ml-team", "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                         "uid": "5f4e3d2c", "groups": ["system:serviceaccounts",
                                                       "system:authenticated"]},
            "object": realistic_pod(), "oldObject": None, "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }).encode()


def stage_costs(body: bytes) -> dict[str, float]:
    """Best-of-N microseconds of each pure stage of one admission, in this process."""
    config, gpus = Config(), ClusterGpus()
    review = parse(body)
    decision = decide(review.request, config, gpus)
    stages = {"parse_us": lambda: parse(body),
              "decide_us": lambda: decide(review.request, config, gpus),
              "answer_us": lambda: answer(review.uid, decision)}
    return {name: round(min(timeit.repeat(stage, number=200, repeat=15)) / 200 * 1e6, 1)
            for name, stage in stages.items()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(latencies: list[float], errors: int, seconds: float) -> dict[str, float]:
    return {
        "requests": len(latencies), "errors": errors,
        "rps": round(len(latencies) / seconds, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
    }


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection speaking just enough HTTP for this benchmark.

    aiohttp's client costs more CPU per request than the server under test, and the client
    has one core here; this protocol costs a fraction of it, so the server is what gets
    measured. Answers are checked the same way (status 200, allowed).
    """

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).lower()
        at = head.find(b"content-length:")
        length = int(head[at + 15:head.find(b"\r\n", at) if head.find(b"\r\n", at) > 0
                          else len(head)]) if at >= 0 else 0
        if len(self.buffer) < end + 4 + length:
            return
        status = int(head[9:12])
        body = bytes(self.buffer[end + 4:end + 4 + length])
        del self.buffer[:end + 4 + length]
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("closed"))

    async def send(self, payload: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(payload)
        return await self.waiter


class RawClient:
    def __init__(self, port: int, body: bytes, tls: ssl.SSLContext) -> None:
        self.port = port
        self.tls = tls
        self.payload = (f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}"
                        f"\r\n\r\n").encode() + body

    async def connect(self) -> Connection:
        _, protocol = await asyncio.get_running_loop().create_connection(
            Connection, "127.0.0.1", self.port, ssl=self.tls, server_hostname="localhost")
        return protocol

    async def post(self, connection: Connection) -> bool:
        status, data = await connection.send(self.payload)
        return status == 200 and b'"allowed":true' in data


class AiohttpClient:
    def __init__(self, port: int, body: bytes, tls: ssl.SSLContext) -> None:
        self.url = f"https://127.0.0.1:{port}/mutate"
        self.body = body
        self.tls = tls
        self.sessions: list[aiohttp.ClientSession] = []

    async def connect(self) -> aiohttp.ClientSession:
        # One session of one connection per client: a closed-loop client is a connection.
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1, ssl=self.tls))
        self.sessions.append(session)
        return session

    async def post(self, session: aiohttp.ClientSession) -> bool:
        async with session.post(self.url, data=self.body,
                                headers={"Content-Type": "application/json"}) as response:
            data = await response.read()
        return response.status == 200 and b'"allowed":true' in data

    async def close(self) -> None:
        for session in self.sessions:
            await session.close()


async def closed_loop(client: Any, concurrency: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    connections = [await client.connect() for _ in range(concurrency)]
    # Warm every connection (TLS handshake done) before the clock starts.
    await asyncio.gather(*(client.post(c) for c in connections))
    start = time.perf_counter()
    end = start + seconds

    async def worker(connection: Any) -> None:
        nonlocal errors
        while True:
            sent = time.perf_counter()
            if sent >= end:
                return
            if not await client.post(connection):
                errors += 1
            latencies.append(time.perf_counter() - sent)

    await asyncio.gather(*(worker(c) for c in connections))
    elapsed = time.perf_counter() - start
    if isinstance(client, AiohttpClient):
        await client.close()
    return summary(latencies, errors, elapsed)


async def open_loop(client: Any, rate: float, seconds: float,
                    pool: int = 64) -> dict[str, float]:
    """Requests start on schedule; each takes an idle keep-alive connection from a pool
    (as the API server's client does), waiting for one when all are busy. Latency counts
    from the scheduled start, so waiting for a connection is counted."""
    latencies: list[float] = []
    errors = 0
    idle: asyncio.Queue[Any] = asyncio.Queue()
    for _ in range(pool):
        connection = await client.connect()
        await client.post(connection)
        idle.put_nowait(connection)

    async def one(scheduled: float) -> None:
        nonlocal errors
        connection = await idle.get()
        try:
            if not await client.post(connection):
                errors += 1
        finally:
            idle.put_nowait(connection)
        latencies.append(time.perf_counter() - scheduled)

    total = int(rate * seconds)
    start = time.perf_counter()
    tasks = []
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    if isinstance(client, AiohttpClient):
        await client.close()
    result = summary(latencies, errors, elapsed)
    result["offered_rps"] = rate
    return result


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
                 "HOME": tmp_name, "VGPU_LOG_FORMAT": "json"})
        # One core for the server (threads it starts later inherit it).
        os.sched_setaffinity(process.pid, {server_cpu})
        try:
            wait_ready(metrics_port, process)
            os.sched_setaffinity(0, client_cpus)
            tls = ssl.create_default_context(cafile=str(ca_file))
            body = review_body()
            make = RawClient if args.client == "raw" else AiohttpClient
            result: dict[str, Any] = {
                "bench": "webhook", "client": args.client, "body_bytes": len(body),
                "server_cpu": server_cpu,
                "client_cpus": sorted(client_cpus), "duration_s": args.duration,
                "loadavg_before": round(os.getloadavg()[0], 2),
                "stages": stage_costs(body),
            }
            for concurrency in (16, 64):
                result[f"closed_c{concurrency}"] = measured(
                    process.pid, closed_loop(make(port, body, tls), concurrency, args.duration))
                print(f"closed loop c={concurrency}: {result[f'closed_c{concurrency}']}",
                      file=sys.stderr)
            result["open_loop"] = measured(
                process.pid, open_loop(make(port, body, tls), args.rate, args.duration))
            print(f"open loop {args.rate}/s: {result['open_loop']}", file=sys.stderr)
            result["rps_max"] = max(result["closed_c16"]["rps"], result["closed_c64"]["rps"])
            result["targets"] = {
                "rps_ge_3000": result["rps_max"] >= 3000,
                "open_loop_p99_le_10ms": result["open_loop"]["p99_ms"] <= 10.0,
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
