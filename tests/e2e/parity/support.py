"""One scenario under kube-scheduler and under vgpu-scheduler, and what each made of it.

kube-scheduler is the reference for every rule a pod can state (affinity, spread,
volumes, ports, preemption). A scenario is a function of a :class:`Run`: it makes its
nodes and pods through the run (whole ``nvidia.com/gpu`` pods, which both schedulers
understand: the nodes advertise them in allocatable for kube-scheduler and carry a vgpu
inventory for ours), waits for the run to settle, checks each placement against the
pods' rules and returns an outcome: what must be the same under both schedulers (which
pods are pending, how many sit in each zone...; score ties may break differently, so
rarely the exact node). :func:`both` plays it under each scheduler in turn, each run in a
namespace of its own and on nodes of its own (labelled with the run, which its pods
select), and removes each run's nodes before the next starts, so that both see the same
cluster.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.controlplane.cluster import ControlPlane
from tests.e2e.scheduler_kube_support import bound, delete_now, events_of, pods_of, wait_for
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.cluster.port import Obj, Selector
from vgpu.kube import adapter

#: The label that keeps one run's nodes apart (its pods select it).
RUN = "parity.vgpu.io/run"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
KUBE = "kube-parity"
VGPU = "vgpu-parity"


def gpu_node(name: str, run: str, gpus: int = 2, *, labels: dict[str, str] | None = None,
             taints: list[dict[str, str]] | None = None,
             allocatable: dict[str, str] | None = None) -> Obj:
    """A node both schedulers can place whole GPUs on (and ``allocatable``'s resources)."""
    node = builders.node(name, builders.devices(name, gpus), cpu="16", heartbeat=time.time(),
                         labels={RUN: run, **(labels or {})}, taints=taints or ())
    for part in ("allocatable", "capacity"):
        node["status"][part].update({"nvidia.com/gpu": str(gpus), **(allocatable or {})})
    return node


def gpu_pod(name: str, namespace: str, scheduler: str, run: str, *, gpus: int = 1,
            labels: dict[str, str] | None = None, ports: list[dict[str, Any]] | None = None,
            limits: dict[str, str] | None = None, **spec: Any) -> Obj:
    """A pod of whole GPUs (and ``limits``) that selects its run's nodes (and whatever
    ``nodeSelector`` adds)."""
    selector = {RUN: run, **spec.pop("nodeSelector", {})}
    container = builders.container(gpus=gpus, cpu="100m")
    container["resources"]["limits"].update(limits or {})
    pod = builders.pod(name, [container], namespace=namespace,
                       scheduler_name=scheduler, nodeSelector=selector, **spec)
    pod["metadata"]["labels"] = dict(labels or {})
    if ports:
        pod["spec"]["containers"][0]["ports"] = ports
    pod["spec"]["automountServiceAccountToken"] = False
    return pod


@dataclass
class Run:
    """One scenario under one scheduler: its own nodes, in its own namespace."""

    kube: adapter.KubeCluster
    namespace: str
    scheduler: str
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    nodes: list[str] = field(default_factory=list)
    #: Cluster-scoped objects the scenario made besides nodes (kind, name).
    made: list[tuple[str, str]] = field(default_factory=list)

    def node(self, gpus: int = 2, **kw: Any) -> str:
        name = f"p{self.run}-{len(self.nodes)}"
        self.kube.create("nodes", gpu_node(name, self.run, gpus, **kw))
        self.nodes.append(name)
        return name

    def pod(self, name: str, **kw: Any) -> Obj:
        return self.kube.create("pods", gpu_pod(name, self.namespace, self.scheduler,
                                                self.run, **kw))

    def create(self, kind: str, obj: Obj) -> Obj:
        """A namespaced object in the run's namespace, or a cluster-scoped one that is
        deleted with the run."""
        made = self.kube.create(kind, obj)
        if not obj["metadata"].get("namespace"):
            self.made.append((kind, obj["metadata"]["name"]))
        return made

    def name(self, base: str) -> str:
        """A cluster-wide unique name for a cluster-scoped object of the run."""
        return f"{base}-{self.run}"

    def bound(self) -> dict[str, str]:
        return bound(self.kube, self.namespace)

    def settle(self, expect_bound: int, quiet: float = 3.0, timeout: float = 60.0
               ) -> dict[str, str]:
        """Wait until ``expect_bound`` pods are bound and nothing changes for ``quiet``
        seconds (a scheduler binding more would show within that time)."""
        wait_for(lambda: len(self.bound()) >= expect_bound, timeout,
                 f"{expect_bound} pods bound by {self.scheduler}")
        before = self.bound()
        time.sleep(quiet)
        after = self.bound()
        assert after == before, f"{self.scheduler} kept binding: {before} → {after}"
        return after

    def pending(self) -> set[str]:
        pods = self.kube.list("pods", Selector(namespace=self.namespace)).items
        return {p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")}

    def pod_obj(self, name: str) -> Obj:
        return pods_of(self.kube, self.namespace)[name]

    def why(self, pod: str) -> str:
        """The pod's latest FailedScheduling message, without the preemption part (which
        v1.20's kube-scheduler does not write)."""
        found = wait_for(lambda: events_of(self.kube, self.namespace, pod,
                                           "FailedScheduling"), 30,
                         f"a FailedScheduling event for {pod} from {self.scheduler}")
        latest = max(found, key=lambda e: (e.get("lastTimestamp") or "", e["metadata"]["name"]))
        message: str = latest["message"]
        return message.split(" preemption: ", maxsplit=1)[0]

    def zone_counts(self, placed: dict[str, str]) -> Counter[str]:
        zones = {n: self.kube.get("nodes", n)["metadata"]["labels"].get(ZONE, "")
                 for n in set(placed.values())}
        return Counter(zones[n] for n in placed.values())

    def cleanup(self) -> None:
        for pod in self.kube.list("pods", Selector(namespace=self.namespace)).items:
            delete_now(self.kube, self.namespace, pod["metadata"]["name"])
        for kind, name in [*reversed(self.made), *(("nodes", n) for n in self.nodes)]:
            with contextlib.suppress(Exception):
                self.kube.delete(kind, name)  # type: ignore[arg-type]


Outcome = dict[str, Any]
Scenario = Callable[[Run], Outcome]


def both(control_plane: ControlPlane, kube: adapter.KubeCluster,
         scenario: Scenario) -> Outcome:
    """The scenario under kube-scheduler, then under vgpu-scheduler (each alone, so that
    they see the same cluster and do not compete for the machine's cores; vgpu's run has
    fake node agents answering its allocation gate). Asserts that both outcomes are the
    same, and returns it."""
    outcomes: list[Outcome] = []
    for scheduler in (KUBE, VGPU):
        namespace = f"parity-{uuid.uuid4().hex[:8]}"
        control_plane.ensure_namespace(namespace)
        run = Run(kube, namespace, scheduler)
        agents = FakeAgents(kube, namespace) if scheduler == VGPU else contextlib.nullcontext()
        try:
            with agents:
                outcomes.append(scenario(run))
        except AssertionError as exc:
            raise AssertionError(f"under {scheduler}: {exc}") from None
        finally:
            run.cleanup()
    by_kube, by_vgpu = outcomes
    assert by_vgpu == by_kube, f"kube-scheduler: {by_kube}\nvgpu-scheduler: {by_vgpu}"
    return by_kube


def per_node(placed: dict[str, str], pods: Iterable[str]) -> dict[str, int]:
    out: Counter[str] = Counter(placed[p] for p in pods if p in placed)
    return dict(out)
