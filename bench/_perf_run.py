"""One workload of ``bench/scheduler_perf.py`` under one scheduler, on a control plane of
its own, with ``bench/bind.py``'s harness: its control plane, the agents' stand-in
process, vgpu-scheduler or kube-scheduler v1.20.2 as a process, the validating webhook.

Upstream's ops run in order: the nodes, then each ``createPods`` step (waiting until its
pods are bound unless it skips the wait, as upstream's ``skipWaitToCompletion``), the
churn in the background. The measured step's pods are timed from their create request
to the watch showing them bound, as in bind.py. The end state is then listed and checked
(``bench/_perf_checks.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _bind_requests as requests
import _perf_workloads as wl
from _bind_cluster import Agents, Scheduler, cluster, kube_scheduler
from _bind_process import parallel, self_cpu
from _bind_webhook import tenant, validating_webhook
from _perf_checks import hard_rules, soft_measures
from _perf_report import KUBE, figures
from _support import cpu_seconds

import vgpu.annotations as ann
from vgpu import codecs
from vgpu.cluster.port import Obj, Selector
from vgpu.errors import ClusterError
from vgpu.kube.adapter import KubeCluster, connect

#: How often the nodes' heartbeats are written again in a long run: inside vgpu's default
#: ``nodeHeartbeatExpirySeconds`` (180) with room to spare; the agents write every 30 s.
HEARTBEAT_SECONDS = 90.0


@dataclasses.dataclass(frozen=True)
class Options:
    gpus: int = 4
    timeout: float = 600.0
    create_threads: int = 16
    agent_threads: int = 16
    webhook: bool = True
    leader_elect: bool = True
    #: Merged over the bench's vgpu-scheduler configuration.
    vgpu_config: dict[str, Any] = dataclasses.field(default_factory=dict)


class _Background:
    """A thread doing ``step`` every ``every`` seconds until stopped, its failures counted
    (a bench that hid them would report a cluster it did not run)."""

    def __init__(self, every: float, step: Any) -> None:
        self.errors = 0
        self._stop = threading.Event()
        self._every, self._step = every, step
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._step()
            except ClusterError:
                self.errors += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _heartbeats(kube: KubeCluster, names: list[str]) -> None:
    stamp = codecs.encode_heartbeat(dt.datetime.now(dt.UTC))
    parallel(8, lambda n: kube.patch_annotations("nodes", n, {ann.NODE_HEARTBEAT: stamp}), names)


class _Churn:
    """Upstream's churn op in ``recreate`` mode with ``number: 1``: on each tick every
    template's object is created, or deleted if the tick before created it."""

    def __init__(self, kube: KubeCluster, op: wl.Churn, namespace: str, scheduler: str) -> None:
        self._kube, self._op, self._ns, self._scheduler = kube, op, namespace, scheduler
        self._live: dict[str, tuple[str, str]] = {}
        self._made = 0

    def tick(self) -> None:
        for template in self._op.templates:
            if template in self._live:
                kind, name = self._live.pop(template)
                self._kube.delete(kind, name, self._ns if kind != "nodes" else None)
            else:
                self._made += 1
                kind, obj = wl.churn_object(template, self._made, self._ns, self._scheduler)
                self._kube.create(kind, obj)
                self._live[template] = (kind, obj["metadata"]["name"])


def _wait(agents: Agents, target: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while agents.bound() < target:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _scheduler(stack: contextlib.ExitStack, scheduler: str, *, cp: Any, kubeconfig: str,
               tmp: Path, name: str, opts: Options) -> tuple[int, Scheduler | None]:
    """Start the scheduler under test (stopped when ``stack`` closes): (pid, vgpu's)."""
    if scheduler == KUBE:
        return stack.enter_context(kube_scheduler(cp, name)), None
    config: dict[str, Any] = {"schedulerName": name, "scheduler": {"apiQps": 0}}
    for key, value in opts.vgpu_config.items():
        if isinstance(value, dict):
            config.setdefault(key, {}).update(value)
        else:
            config[key] = value
    sched = Scheduler(kubeconfig, tmp, config, opts.leader_elect)
    stack.callback(sched.stop)
    sched.ready()
    return sched.proc.pid, sched


def _namespaces(kube: KubeCluster, cp: Any, workload: wl.Workload) -> list[str]:
    """The PriorityClass and every namespace the ops name."""
    kube.request_json("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                      "create priority class",
                      body={"metadata": {"name": wl.PRIORITY_CLASS}, "value": 10})
    namespaces: list[str] = []
    for i, op in enumerate(workload.ops):
        if isinstance(op, wl.CreatePods | wl.Churn):
            ns = wl.namespace_of(op, i) if isinstance(op, wl.CreatePods) else f"namespace-{i}"
            if ns not in namespaces:
                namespaces.append(ns)
                cp.ensure_namespace(ns)
    return namespaces


def _nodes(kube: KubeCluster, workload: wl.Workload, opts: Options) -> list[str]:
    names: list[str] = []
    for i, op in enumerate(workload.ops):
        if isinstance(op, wl.CreateNodes):
            nodes = wl.nodes(op, f"node-{i}", opts.gpus, time.time())
            parallel(opts.create_threads, lambda n: kube.create("nodes", n), nodes)
            names += [n["metadata"]["name"] for n in nodes]
    return names


def run(workload: wl.Workload, scheduler: str, opts: Options) -> dict[str, Any]:
    """``workload`` under ``scheduler`` (:data:`KUBE` or vgpu's): the measured step's
    figures, the hard rules broken and the soft measures of the end state."""
    short = "kube" if scheduler == KUBE else "vgpu"
    with tempfile.TemporaryDirectory(prefix="vgpu-bench-perf-") as tmp, \
            cluster(None) as (kubeconfig, cp_pids, _, cp), contextlib.ExitStack() as stack:
        kube = connect(kubeconfig, qps=0, pool_size=64)
        assert kube is not None
        name = f"{short}-{workload.name.lower()}"
        namespaces = _namespaces(kube, cp, workload)
        creator: KubeCluster = kube
        pids = {"kube-apiserver": cp_pids[1], "etcd": cp_pids[0]}
        if opts.webhook:
            # Before the nodes: a webhook already serving as they join, as in a cluster
            # (its start-up, which lists the nodes, is not what is measured).
            pids["webhook"] = stack.enter_context(validating_webhook(kube, kubeconfig,
                                                                     Path(tmp), name))
            for ns in namespaces:
                client = connect(kubeconfig, qps=0, pool_size=64)
                assert client is not None
                tenant(client, ns)
                creator = client
        node_names = _nodes(kube, workload, opts)
        waited = [op for op in workload.ops if isinstance(op, wl.CreatePods) and op.wait]
        agents = Agents(kubeconfig, None, sum(op.count for op in waited), opts.agent_threads)
        try:
            pids["scheduler"], sched = _scheduler(stack, scheduler, cp=cp,
                                                  kubeconfig=kubeconfig, tmp=Path(tmp),
                                                  name=name, opts=opts)
            pids["agents"] = agents.pid
            heartbeats = _Background(HEARTBEAT_SECONDS, lambda: _heartbeats(kube, node_names))
            stack.callback(heartbeats.stop)
            out = _ops(workload, _Phase(name, kube, creator, agents, pids, opts))
            out["heartbeat_errors"] = heartbeats.errors
            if sched is not None:
                m = sched.metrics()
                out["vgpu_metrics"] = {k.split("vgpu_scheduler_", 1)[1]: v for k, v in m.items()
                                       if k.startswith(("vgpu_scheduler_schedule_attempts_total",
                                                        "vgpu_scheduler_bindings_total",
                                                        "vgpu_scheduler_permit_waits_total"))}
        finally:
            stack.close()
            seen, _, errors = agents.finish()
        if errors:
            out["agent_errors"] = errors[:5]
        sent, cpu, load = out.pop("_sent"), out.pop("_cpu"), out.pop("_load")
        bound = {k: seen[k] for k in sent if k in seen}
        if bound:  # all of them, but after a timeout
            out.update(figures(sent={k: sent[k] for k in bound}, bound=bound, cpu=cpu,
                               load=load))
        all_pods = [p for ns in namespaces
                    for p in kube.list("pods", Selector(namespace=ns)).items]
        nodes = kube.list("nodes").items
        keys = [f"{wl.namespace_of(op, i)}/p{i}-{j:05d}" for i, op in enumerate(workload.ops)
                if isinstance(op, wl.CreatePods) and op.wait for j in range(op.count)]
        out["hard"] = hard_rules(nodes, all_pods, waited=keys, gpu_assignments=scheduler != KUBE)
        out["hard_total"] = sum(out["hard"].values())
        present = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in all_pods}
        out["deleted"] = sum(1 for k in keys if k not in present)
        out["soft"] = soft_measures(nodes, all_pods)
    return out


@dataclasses.dataclass(frozen=True)
class _Phase:
    """What the steps of one run act through."""
    scheduler_name: str
    kube: KubeCluster
    #: Creates the workload's pods: the tenant when the webhook is on.
    creator: KubeCluster
    agents: Agents
    pids: dict[str, int]
    opts: Options


def _ops(workload: wl.Workload, phase: _Phase) -> dict[str, Any]:
    """Run the pod and churn steps in order; the measured step's sends, CPU and writes."""
    out: dict[str, Any] = {"_sent": {}, "_cpu": {}, "_load": os.getloadavg()[0]}
    loops: list[_Background] = []
    try:
        _steps(workload, phase, out, loops)
    finally:
        for loop in loops:
            loop.stop()
        if loops:
            out["churn_errors"] = sum(loop.errors for loop in loops)
    return out


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    now = {k: cpu_seconds(pid, children=True) for k, pid in pids.items()}
    now["bench"] = self_cpu()
    return now


def _steps(workload: wl.Workload, phase: _Phase, out: dict[str, Any],
           loops: list[_Background]) -> None:
    expected = 0
    for i, op in enumerate(workload.ops):
        if isinstance(op, wl.Churn):
            churn = _Churn(phase.kube, op, f"namespace-{i}", phase.scheduler_name)
            loops.append(_Background(op.interval_ms / 1000, churn.tick))
            continue
        if not isinstance(op, wl.CreatePods):
            continue
        ns = wl.namespace_of(op, i)
        pods = [wl.pod(op.template, f"p{i}-{j:05d}", ns, phase.scheduler_name)
                for j in range(op.count)]
        sent: dict[str, float] = {}

        def create(pod: Obj, sent: dict[str, float] = sent) -> None:
            sent[pod["metadata"]["name"]] = time.time()
            phase.creator.create("pods", pod)

        if op.measure:
            before = _cpu(phase.pids)
            out["_load"] = os.getloadavg()[0]
            asked = requests.counts(phase.kube)
        parallel(phase.opts.create_threads, create, pods)
        if op.wait:
            expected += op.count
            if not _wait(phase.agents, expected, phase.opts.timeout):
                out["error"] = (f"step {i} ({op.template}): {phase.agents.bound()} of "
                                f"{expected} pods bound after {phase.opts.timeout:g} s")
        if op.measure:
            after = _cpu(phase.pids)
            out["_cpu"] = {k: after[k] - before[k] for k in after}
            out["_sent"] = sent
            out.update(requests.per_pod(asked, requests.settled(phase.kube, quiet=1.0,
                                                                limit=8), len(pods)))
        if "error" in out:
            return
