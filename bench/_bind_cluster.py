"""The cluster side of ``bench/bind.py``: the control plane (or a running cluster), the
node agents' stand-in process, the ``vgpu scheduler`` process, and the final check.

It imports the test helpers, so bind.py imports it once the repository is on ``sys.path``
(and the agents' process, spawned, inherits that path)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from _support import ROOT
from prometheus_client.parser import text_string_to_metric_families

import vgpu.annotations as ann
from tests.controlplane.cluster import ControlPlane, free_port
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.support.fakeagent import FakeAgents
from vgpu import codecs
from vgpu.cluster.port import Obj, Selector
from vgpu.errors import ConflictError
from vgpu.kube.adapter import KubeCluster, connect
from vgpu.usage import tally

NAMESPACE = "bench"


def agents_main(kubeconfig: str, namespace: str | None, expected: int,  # noqa: PLR0917
                workers: int, ready: Any, done: Any, stop: Any, results: Any,
                count: Any) -> None:
    """The node agents' part, in a process of its own so that the creating threads here
    do not hold up its watch (one interpreter lock per process)."""
    kube = connect(kubeconfig, qps=0, pool_size=workers + 4)
    assert kube is not None
    seen: dict[str, float] = {}
    lock = threading.Lock()

    def on_bound(pod: Obj, when: float) -> None:
        with lock:
            seen.setdefault(pod["metadata"]["name"], when)
            count.value = len(seen)
            if len(seen) >= expected:
                done.set()

    with FakeAgents(kube, namespace, workers=workers, on_bound=on_bound) as agents:
        ready.set()
        stop.wait()
        with lock:
            results.put((dict(seen), agents.marked, list(agents.errors)))


class Agents:
    """The agents' stand-in over ``namespace`` (None: every namespace); ``done`` is set once
    ``expected`` pods were seen bound, :meth:`bound` says how many so far. Pods are told
    apart by name: give pods of different namespaces different names."""

    def __init__(self, kubeconfig: str, namespace: str | None, expected: int,
                 workers: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.ready, self.done, self.stop = ctx.Event(), ctx.Event(), ctx.Event()
        self.results: Any = ctx.Queue()
        self._count: Any = ctx.Value("i", 0, lock=False)
        self.proc = ctx.Process(target=agents_main, daemon=True,
                                args=(kubeconfig, namespace, expected, workers, self.ready,
                                      self.done, self.stop, self.results, self._count))
        self.proc.start()
        assert self.proc.pid is not None
        self.pid: int = self.proc.pid
        if not self.ready.wait(60):
            raise SystemExit("the agents' process did not start")

    def bound(self) -> int:
        """Pods seen bound so far (each once, deleted ones included)."""
        return int(self._count.value)

    def finish(self) -> tuple[dict[str, float], int, list[str]]:
        self.stop.set()
        result: tuple[dict[str, float], int, list[str]] = self.results.get(timeout=60)
        self.proc.join(10)
        return result


@contextlib.contextmanager
def cluster(kubeconfig: str | None) -> Iterator[tuple[str, list[int], str, ControlPlane | None]]:
    """(kubeconfig, [etcd pid, apiserver pid] when started here, a fresh namespace, the
    control plane when started here)."""
    if not kubeconfig:
        with ControlPlane() as cp:
            cp.ensure_namespace(NAMESPACE)
            yield str(cp.kubeconfig), cp.pids, NAMESPACE, cp
        return
    kube = connect(kubeconfig, qps=0)
    assert kube is not None
    namespace = f"{NAMESPACE}-{os.getpid()}-{int(time.time())}"
    kube.request_json("POST", "/api/v1/namespaces", "create namespace",
                      body={"metadata": {"name": namespace}})
    with contextlib.suppress(ConflictError):  # (a controller-manager may have made it)
        kube.request_json("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
                          "create service account", body={"metadata": {"name": "default"}})
    yield kubeconfig, [], namespace, None
    # Pods first, at once (no kubelet would confirm a graceful delete), then the nodes.
    for pod in kube.list("pods", Selector(namespace=namespace)).items:
        kube.request_json("DELETE", f"/api/v1/namespaces/{namespace}/pods/"
                          f"{pod['metadata']['name']}", "delete pod",
                          query=[("gracePeriodSeconds", "0")])
    for node in kube.list("nodes").items:
        if node["metadata"]["name"].startswith(f"{namespace}-"):
            kube.delete("nodes", node["metadata"]["name"])
    kube.request_json("DELETE", f"/api/v1/namespaces/{namespace}", "delete namespace")


@contextlib.contextmanager
def kube_scheduler(cp: ControlPlane | None, name: str) -> Iterator[int]:
    """kube-scheduler v1.20.2 for pods of ``spec.schedulerName: name``; yields its pid."""
    if cp is None:
        raise SystemExit("--against kube-scheduler starts its own control plane; "
                         "leave out --kubeconfig")
    with KubeScheduler(cp, scheduler_name=name) as ks:
        yield ks.pid


class Scheduler:
    def __init__(self, kubeconfig: str, workdir: Path, config: dict[str, Any],
                 leader_elect: bool = True) -> None:
        self.port = free_port()
        cfg = workdir / "config.yaml"
        cfg.write_text(yaml.safe_dump(config))
        self.log = workdir / "scheduler.log"
        # Plain metrics on the loopback address: the bench reads them with no token.
        env = {**os.environ, "VGPU_LOG_LEVEL": "warning", "VGPU_METRICS_SERVER__INSECURE": "true"}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vgpu.cli", "scheduler", "--kubeconfig", kubeconfig,
                 "--config", str(cfg), "--metrics-port", str(self.port),
                 "--address", "127.0.0.1",
                 # As the manifests run it: every write then goes through the Lease's fence.
                 *(("--leader-elect", "--lease-namespace", "default",
                    "--lease-name", f"bench-{self.port}") if leader_elect else ())],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)

    def ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"scheduler exited:\n{self.log.read_text()[-3000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/readyz", timeout=2) as resp:
                # Ready, and leading: a follower schedules nothing.
                if resp.status == 200 and resp.read().strip() != b"follower":
                    return
            time.sleep(0.1)
        raise SystemExit("scheduler not ready in time")

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                key = s.name + "".join(f"{{{k}={v}}}" for k, v in sorted(s.labels.items())
                                       if k not in ("le",))
                if "le" in s.labels or "uuid" in s.labels:
                    continue
                out[key] = s.value
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def check(kube: KubeCluster, namespace: str, pods: int, *, assigned: bool = True) -> None:
    """Every pod bound once with an assignment on its node (``assigned``: bound by
    vgpu-scheduler); no GPU over-committed."""
    items = kube.list("pods", Selector(namespace=namespace)).items
    if not assigned:
        assert len(items) == pods and all(p["spec"].get("nodeName") for p in items)
        return
    assignments = []
    for pod in items:
        node = pod["spec"].get("nodeName")
        assert node, pod["metadata"]["name"]
        a = codecs.decode_assignment(pod["metadata"]["annotations"][ann.ASSIGNMENT])
        assert a.node == node
        assignments.append(a)
    assert len(assignments) == pods
    for uuid, usage in tally(assignments).items():
        assert usage.memory_mib <= 40960 and usage.cores <= 100 and usage.tasks <= 10, uuid
