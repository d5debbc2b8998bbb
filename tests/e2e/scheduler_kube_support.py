"""Driving and observing `vgpu scheduler` processes on the e2e control plane.

Shared by the ``test_scheduler_kube*`` modules: a GPU pod that selects only its test's
nodes, :class:`SchedulerProcess` (one `vgpu scheduler` with its own config, metrics port
and log), bounded waits, what the cluster says about a test's pods (bindings, events,
FailedScheduling reasons), an overcommit check on every GPU, and :class:`History`, every
version of every pod from a watch. The fixtures that start them are in ``conftest.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

import vgpu.annotations as ann
from tests.controlplane.cluster import ControlPlane, free_port
from vgpu import builders, codecs, confusable
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import Obj, Selector
from vgpu.kube import adapter
from vgpu.usage import tally

ROOT = Path(__file__).resolve().parents[2]

#: The label of a test's nodes, which its pods select (value: the test's namespace).
TEST_LABEL = "e2e.vgpu.io/test"


def gpu_pod(name: str, namespace: str, scheduler_name: str, *containers: dict[str, Any],
            annotations: dict[str, str] | None = None) -> Obj:
    obj = builders.pod(name, list(containers) or None, namespace=namespace,
                    scheduler_name=scheduler_name, annotations=annotations,
                    nodeSelector={TEST_LABEL: namespace})
    obj["spec"]["automountServiceAccountToken"] = False
    return obj


def delete_now(kube: adapter.KubeCluster, namespace: str, name: str) -> None:
    """Delete a pod for good: with no kubelet to confirm that its containers ended, a
    graceful delete would leave it Terminating (and holding its GPU share) forever."""
    kube.request_json("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", "delete pod",
                      query=[("gracePeriodSeconds", "0")])


class SchedulerProcess:
    """One `vgpu scheduler` process with its own config file, metrics port and log."""

    def __init__(self, cp: ControlPlane, workdir: Path, scheduler_name: str, *args: str,
                 config: dict[str, Any] | None = None, tag: str = "sched",
                 kubeconfig: Path | None = None) -> None:
        self.port = free_port()
        self.log = workdir / f"{tag}.log"
        cfg_file = workdir / f"{tag}.yaml"
        cfg_file.write_text(yaml.safe_dump({"schedulerName": scheduler_name,
                                            "metricsServer": {"insecure": True},
                                            **(config or {})}))
        self.argv = [sys.executable, "-m", "vgpu.cli", "scheduler", "--kubeconfig",
                     str(kubeconfig or cp.kubeconfig), "--config", str(cfg_file), "--metrics-port",
                     str(self.port), "--address", "127.0.0.1", *args]
        env = {**os.environ, "VGPU_LOG_FORMAT": "json"}
        env.pop("VGPU_CONFIG", None)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=ROOT, env=env, start_new_session=True)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}",
                                        timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def ready(self) -> str | None:
        status, body = self.get("/readyz")
        return body.strip() if status == 200 else None

    def wait_ready(self, seconds: float = 30) -> str:
        state = wait_for(self.ready, seconds, f"scheduler ready ({self.log})", self.log)
        assert state is not None
        return state

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` matching ``labels``."""
        from prometheus_client.parser import text_string_to_metric_families

        status, text = self.get("/metrics")
        assert status == 200, text
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        from prometheus_client.parser import text_string_to_metric_families

        _, text = self.get("/metrics")
        return [(s.labels, s.value) for f in text_string_to_metric_families(text)
                for s in f.samples if s.name == name]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"scheduler ignored signal {sig}\n"
                                 f"{self.log.read_text()[-3000:]}") from None


def wait_for(check: Callable[[], Any], seconds: float, what: str,
             log: Path | None = None) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = log.read_text()[-4000:] if log is not None and log.exists() else ""
            raise AssertionError(f"{what}: not within {seconds:g} s\n{tail}")
        time.sleep(0.05)


def pods_of(kube: adapter.KubeCluster, namespace: str) -> dict[str, Obj]:
    return {p["metadata"]["name"]: p
            for p in kube.list("pods", Selector(namespace=namespace)).items}


def bound(kube: adapter.KubeCluster, namespace: str) -> dict[str, str]:
    return {name: p["spec"]["nodeName"] for name, p in pods_of(kube, namespace).items()
            if p["spec"].get("nodeName")}


def events_of(kube: adapter.KubeCluster, namespace: str, pod: str,
              reason: str | None = None) -> list[Obj]:
    items = kube.request_json("GET", f"/api/v1/namespaces/{namespace}/events",
                              "list events")["items"]
    return [e for e in items if e["involvedObject"]["name"] == pod
            and (reason is None or e["reason"] == reason)]


def reasons(message: str) -> tuple[int, dict[str, int]]:
    """``0/7 nodes are available: 6 Too many pods, 1 insufficient GPU memory.`` as
    ``(7, {"Too many pods": 6, "insufficient GPU memory": 1})``; the preemption's part
    that follows (``preemption: ...``) is left out."""
    message = message.split(" preemption: ", 1)[0]
    match = re.fullmatch(r"0/(\d+) nodes are available: (.*)\.", message)
    assert match, message
    counts = {}
    for part in match.group(2).split(", "):
        n, _, reason = part.partition(" ")
        counts[reason] = int(n)
    return int(match.group(1)), counts


def our_reasons(message: str, ours: int) -> dict[str, int]:
    """The reasons of a FailedScheduling summary for this test's nodes.

    Other tests leave nodes on the shared control plane; this test's pods select this
    test's nodes by label, so the others are turned away before any resource or GPU
    check (by node affinity, or earlier if unschedulable or tainted)."""
    total, counts = reasons(message)
    foreign = {r: n for r, n in counts.items()
               if r in ("node affinity/selector mismatch", "node is unschedulable")
               or r.startswith("untolerated taint ")}
    assert total - sum(foreign.values()) == ours, message
    return {r: n for r, n in counts.items() if r not in foreign}


def inventory(kube: adapter.KubeCluster, node: str) -> dict[str, Any]:
    raw = kube.get("nodes", node)["metadata"]["annotations"][ann.NODE_GPUS]
    return {d.uuid: d for d in codecs.decode_inventory(raw).devices}


def check_not_overcommitted(kube: adapter.KubeCluster, namespace: str,
                            node_names: list[str]) -> dict[str, Any]:
    """Every bound pod's assignment names its own node's GPUs, and no GPU holds more
    memory, compute or tasks than it has. Returns the usage per GPU."""
    devices = {uuid_: d for n in node_names for uuid_, d in inventory(kube, n).items()}
    assignments = []
    for name, pod in pods_of(kube, namespace).items():
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        assignment = codecs.decode_assignment(pod["metadata"]["annotations"][ann.ASSIGNMENT])
        assert assignment.node == node, name
        for slices in assignment.containers.values():
            assert all(s.uuid.startswith(f"GPU-{node}-") for s in slices), name
        assignments.append(assignment)
    usage = tally(assignments)
    for uuid_, used in usage.items():
        device = devices[uuid_]
        assert used.memory_mib <= device.memory_mib, (uuid_, used)
        assert used.cores <= device.cores, (uuid_, used)
        assert used.tasks <= device.split, (uuid_, used)
    return usage


class History:
    """Every version of every pod in a namespace, from a watch, in resourceVersion order."""

    def __init__(self, kube: adapter.KubeCluster, namespace: str) -> None:
        self.events: list[tuple[float, Obj | None, Obj | None]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.informer = Informer(kube, "pods", self._record, Selector(namespace=namespace),
                                 watch_timeout=5)

    def _record(self, old: Obj | None, new: Obj | None) -> None:
        with self._lock:
            self.events.append((time.time(), old, new))

    def __enter__(self) -> History:
        self._thread = self.informer.start(self._stop, name="history")
        assert self.informer.synced.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def bindings(self) -> dict[str, set[tuple[str, str]]]:
        """Per pod, every distinct (node, assignment) it was seen bound with."""
        seen: dict[str, set[tuple[str, str]]] = defaultdict(set)
        with self._lock:
            for _, _, new in self.events:
                if new is not None and new["spec"].get("nodeName"):
                    seen[new["metadata"]["name"]].add(
                        (new["spec"]["nodeName"],
                         new["metadata"].get("annotations", {}).get(ann.ASSIGNMENT, "")))
        return seen

    def confusable_in_flight(self) -> list[tuple[str, str, str]]:
        """(node, pod, pod) for every two pods in ``bind-phase: allocating`` on one node at
        once that the node agent could confuse (:func:`vgpu.confusable.confusable`)."""
        current: dict[str, dict[str, codecs.Assignment | None]] = defaultdict(dict)
        found = []
        with self._lock:
            for _, old, new in self.events:
                for obj in (old, new):
                    if obj is not None and obj["spec"].get("nodeName"):
                        current[obj["spec"]["nodeName"]].pop(obj["metadata"]["name"], None)
                annotations = (new or {}).get("metadata", {}).get("annotations") or {}
                if new is None or not new["spec"].get("nodeName") or \
                        annotations.get(ann.BIND_PHASE) != ann.PHASE_ALLOCATING:
                    continue
                node, name = new["spec"]["nodeName"], new["metadata"]["name"]
                raw = annotations.get(ann.ASSIGNMENT)
                mine = codecs.decode_assignment(raw) if raw else None
                found += [(node, other, name) for other, theirs in current[node].items()
                          if confusable.confusable(mine, theirs)]
                current[node][name] = mine
        return found


CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def priority_classes(kube: adapter.KubeCluster, prefix: str) -> Iterator[Callable[[int], str]]:
    """For a fixture: ``make(value)`` creates a PriorityClass of that value (v1.20's
    Priority admission refuses a bare ``spec.priority``); all are deleted at the end."""
    made: list[str] = []

    def make(value: int) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        kube.request_json("POST", CLASSES, "create priorityclass", body={
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value})
        made.append(name)
        return name

    yield make
    for name in made:
        kube.request_json("DELETE", f"{CLASSES}/{name}", "delete priorityclass")
