"""`vgpu scheduler` on a real kube-apiserver.

The scheduler runs as the operator runs it, a `vgpu scheduler` process, against the e2e
control plane. There are no kubelets and no node agents: Nodes are plain objects carrying
an inventory and a fresh heartbeat, and :class:`tests.support.fakeagent.FakeAgents`
moves each bound pod from ``bind-phase: allocating`` to ``success`` as an agent's
Allocate would (or holds it, to keep a node's gate closed).

The control plane is shared by every e2e module and the scheduler watches the whole
cluster, so each test gives its scheduler a scheduler name of its own (only that test's
pods are its to place) and deletes its Nodes afterwards (no other test's scheduler
places pods on them).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import os
import random
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

import pytest
import yaml

import vgpu.annotations as ann
from tests.controlplane.cluster import ControlPlane, free_port
from tests.support.fakeagent import FakeAgents
from vgpu import builders, codecs
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import Obj, Selector
from vgpu.kube import adapter
from vgpu.usage import tally

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kube(control_plane: ControlPlane) -> adapter.KubeCluster:
    cluster = adapter.connect(str(control_plane.kubeconfig), qps=0, pool_size=32)
    assert cluster is not None
    return cluster


@pytest.fixture
def scheduler_name(namespace: str) -> str:
    return f"vgpu-{namespace}"[:63]


#: The label of a test's nodes, which its pods select (value: the test's namespace).
TEST_LABEL = "e2e.vgpu.io/test"


@pytest.fixture
def nodes(kube: adapter.KubeCluster, namespace: str) -> Iterator[Callable[..., str]]:
    """``nodes(gpus, **kw)`` creates a GPU node with a fresh heartbeat, labelled for this
    test; all are deleted at the end of the test."""
    created: list[str] = []

    def make(gpus: int = 2, *, heartbeat: float | None = None, **kw: Any) -> str:
        name = f"n-{uuid.uuid4().hex[:8]}"
        kube.create("nodes", builders.node(name, builders.devices(name, gpus, **kw),
                                        heartbeat=time.time() if heartbeat is None
                                        else heartbeat, labels={TEST_LABEL: namespace}))
        created.append(name)
        return name

    yield make
    for name in created:
        with contextlib.suppress(Exception):
            kube.delete("nodes", name)


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
                 config: dict[str, Any] | None = None, tag: str = "sched") -> None:
        self.port = free_port()
        self.log = workdir / f"{tag}.log"
        cfg_file = workdir / f"{tag}.yaml"
        cfg_file.write_text(yaml.safe_dump({"schedulerName": scheduler_name, **(config or {})}))
        self.argv = [sys.executable, "-m", "vgpu.cli", "scheduler", "--kubeconfig",
                     str(cp.kubeconfig), "--config", str(cfg_file), "--metrics-port",
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


@pytest.fixture
def launch(control_plane: ControlPlane, tmp_path: Path,
           scheduler_name: str) -> Iterator[Callable[..., SchedulerProcess]]:
    running: list[SchedulerProcess] = []

    def start(*args: str, config: dict[str, Any] | None = None,
              tag: str | None = None) -> SchedulerProcess:
        proc = SchedulerProcess(control_plane, tmp_path, scheduler_name, *args, config=config,
                                tag=tag or f"sched-{len(running)}")
        running.append(proc)
        return proc

    yield start
    for proc in running:
        with contextlib.suppress(AssertionError):
            proc.stop(signal.SIGKILL)


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
    """``0/7 nodes are available: 6 too many pods, 1 insufficient GPU memory.`` as
    ``(7, {"too many pods": 6, "insufficient GPU memory": 1})``."""
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

    def max_allocating_per_node(self) -> int:
        """The most pods ever in ``bind-phase: allocating`` on one node at once."""
        current: dict[str, set[str]] = defaultdict(set)
        worst = 0
        with self._lock:
            for _, old, new in self.events:
                for obj in (old, new):
                    if obj is not None and obj["spec"].get("nodeName"):
                        current[obj["spec"]["nodeName"]].discard(obj["metadata"]["name"])
                if new is not None and new["spec"].get("nodeName") and new["metadata"].get(
                        "annotations", {}).get(ann.BIND_PHASE) == ann.PHASE_ALLOCATING:
                    node = new["spec"]["nodeName"]
                    current[node].add(new["metadata"]["name"])
                    worst = max(worst, len(current[node]))
        return worst


# --- placement ---------------------------------------------------------------------------

def test_pods_are_bound_with_correct_assignments(kube: adapter.KubeCluster, namespace: str,
                                                 scheduler_name: str, nodes: Any,
                                                 launch: Any) -> None:
    t4 = nodes(2, model="Tesla T4", memory_mib=15360)
    a100 = nodes(4, model="NVIDIA A100-SXM4-40GB", memory_mib=40960)
    c = builders.container
    pods = [
        gpu_pod("two-gpus", namespace, scheduler_name, c(gpus=2, gpumem=3000, cores=30)),
        gpu_pod("on-a100", namespace, scheduler_name, c(gpumem=20000),
                annotations={ann.USE_GPUTYPE: "a100"}),
        gpu_pod("percent", namespace, scheduler_name, c(percent=50),
                annotations={ann.USE_GPUTYPE: "T4"}),
        gpu_pod("sidecars", namespace, scheduler_name, c("x", gpumem=1000, cores=10),
                c("y", gpus=1, gpumem=2000), c("log", gpus=None, cpu="100m")),
    ]
    with FakeAgents(kube, namespace):
        sched = launch()
        assert sched.wait_ready() == "leader"
        for p in pods:
            kube.create("pods", p)
        wait_for(lambda: len(bound(kube, namespace)) == len(pods), 30, "all pods bound",
                 sched.log)
    placed = pods_of(kube, namespace)
    gpus = {t4: inventory(kube, t4), a100: inventory(kube, a100)}
    got: dict[str, dict[str, list[tuple[str, int, int]]]] = {}
    for name, pod in placed.items():
        meta = pod["metadata"]["annotations"]
        assignment = codecs.decode_assignment(meta[ann.ASSIGNMENT])
        assert assignment.node == pod["spec"]["nodeName"]
        assert meta[ann.BIND_PHASE] == ann.PHASE_SUCCESS  # the fake agent moved it on
        bind_time = codecs.decode_time(meta[ann.BIND_TIME], ann.BIND_TIME)
        assert abs(bind_time.timestamp() - time.time()) < 60
        got[name] = {cname: [(s.uuid, s.memory_mib, s.cores) for s in slices]
                     for cname, slices in assignment.containers.items()}
        for slices in assignment.containers.values():
            assert all(s.uuid in gpus[assignment.node] for s in slices), name
        assert [e["message"] for e in events_of(kube, namespace, name, "Scheduled")] == [
            f"Successfully assigned {namespace}/{name} to {assignment.node}"]
    assert placed["on-a100"]["spec"]["nodeName"] == a100
    assert placed["percent"]["spec"]["nodeName"] == t4
    two = got["two-gpus"]["main"]
    assert len({u for u, _, _ in two}) == 2 and {(m, k) for _, m, k in two} == {(3000, 30)}
    assert [(m, k) for _, m, k in got["on-a100"]["main"]] == [(20000, 0)]
    assert [(m, k) for _, m, k in got["percent"]["main"]] == [(7680, 0)]  # 50 % of 15 GiB
    assert sorted(got["sidecars"]) == ["x", "y"]  # keyed by name; "log" asks for no GPU
    assert [(m, k) for _, m, k in got["sidecars"]["x"]] == [(1000, 10)]

    # The per-GPU gauges are the tally of the assignments, labelled like the agent's.
    usage = check_not_overcommitted(kube, namespace, [t4, a100])
    gauges = {labels["uuid"]: (labels, value)
              for labels, value in sched.samples("vgpu_scheduler_gpu_memory_allocated_bytes")
              if labels["node"] in (t4, a100)}
    assert len(gauges) == 6
    for uuid_, (labels, value) in gauges.items():
        device = gpus[labels["node"]][uuid_]
        assert (labels["index"], labels["model"]) == (str(device.index), device.model)
        assert value == usage[uuid_].memory_mib * 2**20 if uuid_ in usage else value == 0
    assert sum(sched.metric("vgpu_scheduler_gpu_tasks", node=n) for n in (t4, a100)) == sum(
        u.tasks for u in usage.values())
    assert sched.metric("vgpu_scheduler_schedule_attempts_total", result="scheduled") == 4
    assert sched.metric("vgpu_scheduler_bindings_total", result="success") == 4
    assert sched.metric("vgpu_scheduler_pod_create_to_bound_seconds_count") == 4
    assert sched.get("/healthz") == (200, "ok\n")
    assert sched.stop() == 0


def test_deleting_a_pod_frees_its_share_and_the_waiting_pod_binds_within_a_second(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    node = nodes(1, memory_mib=16384)
    c = builders.container
    with FakeAgents(kube, namespace), History(kube, namespace) as history:
        sched = launch()
        sched.wait_ready()
        kube.create("pods", gpu_pod("big", namespace, scheduler_name, c(gpumem=12000)))
        wait_for(lambda: "big" in bound(kube, namespace), 20, "big bound", sched.log)
        kube.create("pods", gpu_pod("waiting", namespace, scheduler_name, c(gpumem=8000)))
        failed = wait_for(lambda: events_of(kube, namespace, "waiting", "FailedScheduling"),
                          20, "FailedScheduling of the waiting pod", sched.log)
        assert our_reasons(failed[0]["message"], 1) == {"insufficient GPU memory": 1}
        # A pod that has waited a while (past its first backoff), as in a real queue.
        time.sleep(1.5)
        assert "waiting" not in bound(kube, namespace)
        deleted = time.time()
        delete_now(kube, namespace, "big")
        wait_for(lambda: "waiting" in bound(kube, namespace), 10, "waiting pod bound",
                 sched.log)
    seen_bound = next(t for t, old, new in history.events
                      if new is not None and new["metadata"]["name"] == "waiting"
                      and new["spec"].get("nodeName"))
    assert seen_bound - deleted < 1.0, f"bound {seen_bound - deleted:.3f} s after the delete"
    assert bound(kube, namespace) == {"waiting": node}
    assert sched.stop() == 0


def test_an_unfittable_pod_stays_pending_with_reasons_and_few_events(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    fresh = nodes(1, memory_mib=16384)
    nodes(2, memory_mib=81920, heartbeat=time.time() - 3600)  # its agent went away
    c = builders.container
    # Short backoffs, so that a few retries take a second, not a minute.
    sched = launch(config={"scheduler": {"podInitialBackoffSeconds": 0.1,
                                         "podMaxBackoffSeconds": 0.5}})
    sched.wait_ready()
    kube.create("pods", gpu_pod("huge", namespace, scheduler_name, c(gpumem=30000)))
    event = wait_for(lambda: events_of(kube, namespace, "huge", "FailedScheduling"), 20,
                     "FailedScheduling", sched.log)[0]
    assert event["type"] == "Warning"
    assert our_reasons(event["message"], 2) == {"GPU heartbeat expired": 1,
                                                "insufficient GPU memory": 1}
    assert event["source"]["component"] == "vgpu-scheduler"
    # Cluster changes that could help make the scheduler try again; the same answer is
    # not written again each time.
    for i in range(5):
        devices = builders.devices(fresh, 1, memory_mib=16384 + i + 1)
        kube.patch_annotations("nodes", fresh, {ann.NODE_GPUS: codecs.encode_inventory(
            codecs.NodeInventory(devices))})
        wait_for(lambda i=i: sched.metric("vgpu_scheduler_schedule_attempts_total",
                                          result="unschedulable") >= i + 2, 20,
                 f"retry {i + 1}", sched.log)
    assert "huge" not in bound(kube, namespace)
    assert pods_of(kube, namespace)["huge"]["status"]["phase"] == "Pending"
    assert len(events_of(kube, namespace, "huge", "FailedScheduling")) == 1
    assert sched.metric("vgpu_scheduler_events_total", outcome="limited") >= 3
    assert sched.metric("vgpu_scheduler_pending_pods", queue="unschedulable") + sched.metric(
        "vgpu_scheduler_pending_pods", queue="backoff") == 1
    assert sched.stop() == 0


def test_an_expired_heartbeat_keeps_pods_off_the_node_but_not_their_assignments(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    node = nodes(1, memory_mib=16384)
    c = builders.container
    with FakeAgents(kube, namespace):
        sched = launch()
        sched.wait_ready()
        kube.create("pods", gpu_pod("before", namespace, scheduler_name, c(gpumem=4000)))
        wait_for(lambda: "before" in bound(kube, namespace), 20, "first pod bound", sched.log)
        stale = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
        kube.patch_annotations("nodes", node, {ann.NODE_HEARTBEAT: codecs.encode_heartbeat(stale)})
        kube.create("pods", gpu_pod("after", namespace, scheduler_name, c(gpumem=4000)))
        event = wait_for(lambda: events_of(kube, namespace, "after", "FailedScheduling"), 20,
                         "FailedScheduling", sched.log)[0]
        assert our_reasons(event["message"], 1) == {"GPU heartbeat expired": 1}
        # The pod already there keeps its share: the scheduler still counts it.
        assert sched.metric("vgpu_scheduler_gpu_memory_allocated_bytes", node=node) == (
            4000 * 2**20)
        kube.patch_annotations("nodes", node, {ann.NODE_HEARTBEAT: codecs.encode_heartbeat(
            dt.datetime.now(dt.UTC))})
        wait_for(lambda: "after" in bound(kube, namespace), 20, "bound once the agent is back",
                 sched.log)
    assert sched.metric("vgpu_scheduler_gpu_memory_allocated_bytes", node=node) == (
        8000 * 2**20)
    check_not_overcommitted(kube, namespace, [node])
    assert sched.stop() == 0


# --- restarts ----------------------------------------------------------------------------

def test_sigkill_mid_burst_then_restart_binds_every_pod_once_without_overcommit(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    names = [nodes(4, memory_mib=40960) for _ in range(30)]
    rng = random.Random(5)
    c = builders.container
    pods = [gpu_pod(f"p-{i:03d}", namespace, scheduler_name,
                    c(gpus=rng.choice((1, 1, 1, 2)), gpumem=rng.randrange(2000, 9000, 500),
                      cores=rng.choice((0, 10, 20, 30))))
            for i in range(300)]
    with FakeAgents(kube, namespace, workers=8), History(kube, namespace) as history:
        first = launch(tag="first")
        first.wait_ready()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: kube.create("pods", p), pods))
            wait_for(lambda: len(bound(kube, namespace)) >= 60, 60, "a first share bound",
                     first.log)
            assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        at_kill = len(bound(kube, namespace))
        assert at_kill < len(pods), "the burst was over before the kill; nothing was tested"
        second = launch(tag="second")
        wait_for(lambda: len(bound(kube, namespace)) == len(pods), 120, "every pod bound",
                 second.log)
    bindings = history.bindings()
    assert sorted(bindings) == sorted(p["metadata"]["name"] for p in pods)
    twice = {name: seen for name, seen in bindings.items() if len(seen) != 1}
    assert not twice, f"pods seen bound more than one way: {twice}"
    check_not_overcommitted(kube, namespace, names)
    assert history.max_allocating_per_node() == 1
    assert second.stop() == 0


def test_a_restarted_scheduler_keeps_in_flight_pods_gating_their_node(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    node = nodes(2, memory_mib=16384)
    c = builders.container
    timeout = 6.0
    config = {"scheduler": {"permitTimeoutSeconds": timeout}}

    def bind_time(name: str) -> float:
        meta = pods_of(kube, namespace)[name]["metadata"]["annotations"]
        return codecs.decode_time(meta[ann.BIND_TIME], ann.BIND_TIME).timestamp()

    with FakeAgents(kube, namespace, enabled=False) as agents:
        first = launch(config=config, tag="first")
        first.wait_ready()
        kube.create("pods", gpu_pod("in-flight", namespace, scheduler_name, c(gpumem=1000)))
        wait_for(lambda: "in-flight" in bound(kube, namespace), 20, "first pod bound",
                 first.log)
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        time.sleep(3)  # so that a gate clock restarted by the new process would show
        second = launch(config=config, tag="second")
        second.wait_ready()
        restarted = time.time()
        kube.create("pods", gpu_pod("next", namespace, scheduler_name, c(gpumem=1000)))
        wait_for(lambda: second.metric("vgpu_scheduler_pending_pods", queue="gated") == 1, 20,
                 "the next pod held at its node's gate", second.log)
        # No agent answers: the gate opens permitTimeoutSeconds after the in-flight pod's
        # bind-time, which the restarted scheduler read from the pod.
        wait_for(lambda: "next" in bound(kube, namespace), 20, "next pod bound", second.log)
        assert bind_time("next") >= bind_time("in-flight") + timeout - 0.05
        assert bind_time("next") < restarted + timeout - 2

        # The agent's answer opens the gate long before the timeout.
        kube.create("pods", gpu_pod("after", namespace, scheduler_name, c(gpumem=1000)))
        wait_for(lambda: second.metric("vgpu_scheduler_pending_pods", queue="gated") == 1, 20,
                 "the pod after held at the gate", second.log)
        agents.enable()
        wait_for(lambda: "after" in bound(kube, namespace), 20, "pod after bound", second.log)
        assert bind_time("after") < bind_time("next") + timeout - 1
    assert bound(kube, namespace) == {"in-flight": node, "next": node, "after": node}
    assert second.stop() == 0


# --- leader election ---------------------------------------------------------------------

ELECTION = ("--leader-elect", "--lease-name=vgpu-scheduler", "--lease-duration=4",
            "--renew-deadline=3", "--retry-period=0.5")


def lease_holder(kube: adapter.KubeCluster, namespace: str) -> str:
    lease = kube.request_json(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/vgpu-scheduler",
        "get lease")
    return str(lease["spec"].get("holderIdentity") or "")


def test_two_replicas_one_schedules_and_the_other_takes_over(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    node_names = [nodes(2) for _ in range(3)]
    c = builders.container
    with FakeAgents(kube, namespace):
        a = launch(*ELECTION, f"--lease-namespace={namespace}", "--identity=a", tag="a")
        a_state = a.wait_ready()
        b = launch(*ELECTION, f"--lease-namespace={namespace}", "--identity=b", tag="b")
        b_state = b.wait_ready()
        wait_for(lambda: lease_holder(kube, namespace) in ("a", "b"), 10, "a leader")
        states = {a.ready(), b.ready()}
        assert states == {"leader", "follower"}, (a_state, b_state)
        leader, follower = (a, b) if a.ready() == "leader" else (b, a)
        for i in range(10):
            kube.create("pods", gpu_pod(f"first-{i}", namespace, scheduler_name, c(gpumem=500)))
        wait_for(lambda: len(bound(kube, namespace)) == 10, 30, "first pods bound", leader.log)
        assert leader.metric("vgpu_scheduler_bindings_total", result="success") == 10
        assert follower.metric("vgpu_scheduler_bindings_total", result="success") == 0
        assert follower.metric("vgpu_scheduler_schedule_attempts_total") == 0
        assert (leader.metric("vgpu_scheduler_leader"), follower.metric(
            "vgpu_scheduler_leader")) == (1, 0)
        # The follower's caches are warm: it counts what the leader placed.
        assert sum(follower.metric("vgpu_scheduler_gpu_tasks", node=n)
                   for n in node_names) == 10

        killed = time.monotonic()
        leader.stop(signal.SIGKILL)
        for i in range(10):
            kube.create("pods", gpu_pod(f"then-{i}", namespace, scheduler_name,
                                        c(gpumem=500)))
        wait_for(lambda: follower.ready() == "leader", 10, "takeover", follower.log)
        took = time.monotonic() - killed
        assert took < 4 + 0.5 + 2, f"takeover after {took:.1f} s"  # lease + retry + slack
        wait_for(lambda: len(bound(kube, namespace)) == 20, 30, "all pods bound", follower.log)
        assert follower.metric("vgpu_scheduler_bindings_total", result="success") == 10
        assert lease_holder(kube, namespace) == ("b" if leader is a else "a")
    check_not_overcommitted(kube, namespace, node_names)
    # A clean stop gives the Lease up at once.
    assert follower.stop() == 0
    assert lease_holder(kube, namespace) == ""


def test_a_leader_that_loses_its_lease_stops(kube: adapter.KubeCluster, namespace: str,
                                             launch: Any) -> None:
    sched = launch(*ELECTION, f"--lease-namespace={namespace}", "--identity=me")
    wait_for(lambda: sched.ready() == "leader", 30, "leading", sched.log)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/vgpu-scheduler"
    # Someone else takes the Lease (as after a network partition): the old leader must
    # stop scheduling and exit, and a fresh process rebuilds its state.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lease = kube.request_json("GET", path, "get lease")
        lease["spec"].update(holderIdentity="usurper", leaseDurationSeconds=60,
                             renewTime=dt.datetime.now(dt.UTC).strftime(
                                 "%Y-%m-%dT%H:%M:%S.%fZ"))
        try:
            kube.request_json("PUT", path, "update lease", body=lease)
            break
        except Exception:  # the leader renewed in between: try again
            continue
    assert sched.proc.wait(15) == 1
    assert "lost the lease" in sched.log.read_text()
    assert lease_holder(kube, namespace) == "usurper"


def test_bad_flags_are_errors_without_a_traceback(control_plane: ControlPlane) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vgpu.cli", "scheduler", "--kubeconfig",
         str(control_plane.kubeconfig), "--leader-elect", "--lease-duration=2",
         "--renew-deadline=5"], capture_output=True, text=True, timeout=60, cwd=ROOT,
        check=False)
    assert proc.returncode == 2
    assert "--renew-deadline < --lease-duration" in proc.stderr
    assert "Traceback" not in proc.stderr

