"""The load side of ``bench/admission.py``: the AdmissionReview every request carries,
the clients that send it, and the closed- and open-loop drivers."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from typing import Any

import aiohttp
from _support import percentile


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


def update_body(user: str) -> bytes:
    """An UPDATE review of a placed GPU pod as ``/validate`` sees it: the node agent's
    ``bind-phase: success`` patch (``user`` its service account: answered as a writer
    first), or a tenant's relabelling (the annotations compared, none changed)."""
    old = realistic_pod()
    old["spec"]["nodeName"] = "gpu-node-17"
    old["spec"]["schedulerName"] = "vgpu-scheduler"
    old["metadata"]["annotations"] |= {
        "vgpu.io/assignment": '{"containers":{"trainer":[{"cores":30,"memory_mib":12000,'
                              '"uuid":"GPU-5b3e7c1a-0d2f-4e6a-9b8c-1f2e3d4c5b6a"}]},'
                              '"node":"gpu-node-17","version":1}',
        "vgpu.io/bind-phase": "allocating", "vgpu.io/bind-time": "2026-01-01T00:00:00.000000Z",
        "vgpu.io/admission": '{"version":1,"changes":["spec.schedulerName: \\"vgpu-scheduler'
                             '\\""]}'}
    new = json.loads(json.dumps(old))
    if user.startswith("system:serviceaccount:vgpu-system:"):
        new["metadata"]["annotations"]["vgpu.io/bind-phase"] = "success"
    else:
        new["metadata"]["labels"]["reviewed"] = "yes"
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "1b2c3d4e-5f60-7189-abcd-ef0123456789",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ml-team", "operation": "UPDATE",
            "userInfo": {"username": user, "uid": "6e5d4c3b", "groups": ["system:authenticated"]},
            "object": new, "oldObject": old, "dryRun": False,
            "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }).encode()


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
    def __init__(self, port: int, body: bytes, tls: ssl.SSLContext,
                 path: str = "/mutate") -> None:
        self.port = port
        self.tls = tls
        self.payload = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
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
    def __init__(self, port: int, body: bytes, tls: ssl.SSLContext,
                 path: str = "/mutate") -> None:
        self.url = f"https://127.0.0.1:{port}{path}"
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
