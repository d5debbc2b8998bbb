"""Upstream's scheduler_perf workloads, transcribed as data for ``bench/scheduler_perf.py``.

Source: kubernetes/kubernetes, ``test/integration/scheduler_perf/config/performance-config.yaml``
and the pod templates beside it (``config/pod-*.yaml``), as they stood at v1.21 (the
opcode format of v1.20, namespaces ``sched-setup``/``sched-test``, the churn op of
v1.21). Copyright The Kubernetes Authors, licensed under the Apache License, Version 2.0
(http://www.apache.org/licenses/LICENSE-2.0). What is transcribed is the data of those
YAML files (counts, labels, affinity, spread, priorities, requests), not their code; every
difference is on purpose and said where it is made:

- every pod also asks for ``nvidia.com/gpu: 1`` and ``nvidia.com/gpumem: 1000`` (a vGPU
  of 1,000 MiB), and each Node carries ``gpus`` GPUs: a vgpu inventory for vgpu-scheduler
  and, for kube-scheduler, the same totals as extended resources;
- ``spec.priority: 10`` is written as a PriorityClass of value 10 (``perf-priority-10``):
  the API server's Priority admission refuses a bare ``priority``, which upstream's
  test server runs without;
- ``labelNodePrepareStrategy`` picks each node's zone at random upstream; here zones go
  round robin, so both schedulers get the same cluster;
- the smallest size of each workload is kept (``500Nodes``; ``1000Nodes`` for the churn
  workload) and counts scale with ``--nodes`` at the same pods per node;
- ``automountServiceAccountToken: false`` and no image or ports: nothing runs the pods.

Left out, as they need volumes no GPU test cluster here has: ``SchedulingInTreePVs``,
``SchedulingMigratedInTreePVs`` (AWS EBS volumes, the CSI migration gates, CSINode
limits), ``SchedulingCSIPVs`` (a CSI driver's volumes and CSINode limits) and
``PreemptionPVs`` (AWS EBS volumes bound by upstream's fake PV controller).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from vgpu import builders
from vgpu.cluster.port import Obj

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
#: The measured and unmeasured pods' GPU ask, added to every template.
GPU_LIMITS = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}
#: The PriorityClass that stands for a template's ``priority: 10``.
PRIORITY_CLASS = "perf-priority-10"
#: Upstream's namespaces for pods that name none: ``namespace-<op index>``.
SETUP, TEST = "sched-setup", "sched-test"

_SMALL = {"cpu": "100m", "memory": "500Mi"}


def _term(color: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key,
            "namespaces": [TEST, SETUP]}


def _spread(when: str) -> list[dict[str, Any]]:
    return [{"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"color": "blue"}}}]


#: name -> (labels, spec fields beside the one container, the container's resources,
#: priority 10). Each is upstream's ``config/<name>.yaml``.
TEMPLATES: dict[str, tuple[dict[str, str], dict[str, Any], dict[str, Any], bool]] = {
    "pod-default": ({}, {}, {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-secret-volume": (
        {}, {"volumes": [{"name": "secret", "secret": {"secretName": "secret"}}]},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-pod-affinity": (
        {"color": "blue"},
        {"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term("blue", ZONE)]}}},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-pod-anti-affinity": (
        {"color": "green"},
        {"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term("green", HOSTNAME)]}}},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-preferred-pod-affinity": (
        {"color": "red"},
        {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"podAffinityTerm": _term("red", HOSTNAME), "weight": 1}]}}},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-preferred-pod-anti-affinity": (
        {"color": "yellow"},
        {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"podAffinityTerm": _term("yellow", HOSTNAME), "weight": 1}]}}},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-node-affinity": (
        {}, {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}]}]}}}},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-topology-spreading": (
        {"color": "blue"}, {"topologySpreadConstraints": _spread("DoNotSchedule")},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-with-preferred-topology-spreading": (
        {"color": "blue"}, {"topologySpreadConstraints": _spread("ScheduleAnyway")},
        {"limits": _SMALL, "requests": _SMALL}, False),
    "pod-low-priority": (
        {}, {"terminationGracePeriodSeconds": 0},
        {"limits": {"cpu": "900m", "memory": "500Mi"},
         "requests": {"cpu": "900m", "memory": "500Mi"}}, False),
    "pod-high-priority": (
        {}, {}, {"limits": {"cpu": "3000m", "memory": "500Mi"},
                 "requests": {"cpu": "3000m", "memory": "500Mi"}}, True),
    "pod-large-cpu": ({}, {}, {"requests": {"cpu": "9", "memory": "500Mi"}}, False),
    "pod-high-priority-large-cpu": (
        {}, {}, {"requests": {"cpu": "9", "memory": "500Mi"}}, True),
}


@dataclasses.dataclass(frozen=True)
class CreateNodes:
    """``createNodes``: nodes of upstream's default shape (4 CPUs, 32 GiB, 110 pods)
    with a zone label from ``zones`` if any (``labelNodePrepareStrategy``)."""
    count: int
    zones: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class CreatePods:
    """``createPods``; ``measure`` is upstream's ``collectMetrics``, ``wait`` the opposite
    of its ``skipWaitToCompletion``."""
    count: int
    template: str
    namespace: str | None = None
    measure: bool = False
    wait: bool = True


@dataclasses.dataclass(frozen=True)
class Churn:
    """``churn`` in ``recreate`` mode: every ``interval_ms`` each template's object is
    created, or deleted if the last tick created it (``number: 1``)."""
    templates: tuple[str, ...]
    interval_ms: int


Op = CreateNodes | CreatePods | Churn


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    #: The upstream workload and size transcribed ("SchedulingBasic/500Nodes").
    upstream: str
    ops: tuple[Op, ...]

    @property
    def base_nodes(self) -> int:
        return sum(op.count for op in self.ops if isinstance(op, CreateNodes))


def _basic(name: str, template: str, init: int, measure: int, *,
           namespaces: tuple[str | None, str | None] = (None, None),
           zones: tuple[str, ...] = (), init_template: str | None = None) -> Workload:
    return Workload(name, f"{name}/500Nodes", (
        CreateNodes(500, zones),
        CreatePods(init, init_template or template, namespaces[0]),
        CreatePods(measure, template, namespaces[1], measure=True)))


_MOONS = ("moon-1", "moon-2", "moon-3")
_MIXED = ("pod-default", "pod-with-pod-affinity", "pod-with-pod-anti-affinity",
          "pod-with-preferred-pod-affinity", "pod-with-preferred-pod-anti-affinity")

#: The workloads of performance-config.yaml that make sense with GPU pods, in its order.
WORKLOADS: tuple[Workload, ...] = (
    _basic("SchedulingBasic", "pod-default", 500, 1000),
    _basic("SchedulingPodAntiAffinity", "pod-with-pod-anti-affinity", 100, 400,
           namespaces=(SETUP, TEST)),
    _basic("SchedulingSecrets", "pod-with-secret-volume", 500, 1000),
    _basic("SchedulingPodAffinity", "pod-with-pod-affinity", 500, 1000,
           namespaces=(SETUP, TEST), zones=("zone1",)),
    _basic("SchedulingPreferredPodAffinity", "pod-with-preferred-pod-affinity", 500, 1000,
           namespaces=(SETUP, TEST)),
    _basic("SchedulingPreferredPodAntiAffinity", "pod-with-preferred-pod-anti-affinity",
           500, 1000, namespaces=(SETUP, TEST)),
    _basic("SchedulingNodeAffinity", "pod-with-node-affinity", 500, 1000, zones=("zone1",)),
    _basic("TopologySpreading", "pod-with-topology-spreading", 1000, 1000, zones=_MOONS,
           init_template="pod-default"),
    _basic("PreferredTopologySpreading", "pod-with-preferred-topology-spreading", 1000, 1000,
           zones=_MOONS, init_template="pod-default"),
    Workload("MixedSchedulingBasePod", "MixedSchedulingBasePod/500Nodes", (
        CreateNodes(500, ("zone1",)),
        *(CreatePods(200, t, SETUP) for t in _MIXED),
        CreatePods(1000, "pod-default", measure=True))),
    # Named ``Preemption`` at v1.21, ``PreemptionBasic`` since.
    _basic("PreemptionBasic", "pod-high-priority", 2000, 500, init_template="pod-low-priority"),
    Workload("Unschedulable", "Unschedulable/500Nodes/200InitPods", (
        CreateNodes(500),
        CreatePods(200, "pod-large-cpu", wait=False),
        CreatePods(1000, "pod-default", measure=True))),
    Workload("SchedulingWithMixedChurn", "SchedulingWithMixedChurn/1000Nodes", (
        CreateNodes(1000),
        Churn(("node", "pod-high-priority-large-cpu", "service"), 1000),
        CreatePods(1000, "pod-default", measure=True))),
)
BY_NAME = {w.name: w for w in WORKLOADS}


def scaled(workload: Workload, nodes: int) -> Workload:
    """The workload at ``nodes`` nodes, every count scaled by the same factor (at least 1)."""
    factor = nodes / workload.base_nodes
    ops: list[Op] = []
    for op in workload.ops:
        ops.append(dataclasses.replace(op, count=max(1, round(op.count * factor)))
                   if isinstance(op, CreateNodes | CreatePods) else op)
    return dataclasses.replace(workload, ops=tuple(ops))


def namespace_of(op: CreatePods, index: int) -> str:
    return op.namespace or f"namespace-{index}"


def pod(template: str, name: str, namespace: str, scheduler: str) -> Obj:
    """One pod of ``template`` for ``scheduler``, with the vGPU ask."""
    labels, spec, resources, high = TEMPLATES[template]
    resources = copy.deepcopy(resources)
    resources.setdefault("limits", {}).update(GPU_LIMITS)
    body: dict[str, Any] = {"schedulerName": scheduler, "automountServiceAccountToken": False,
                            "containers": [{"name": "pause", "image": "pause",
                                            "resources": resources}],
                            **copy.deepcopy(spec)}
    if high:
        body["priorityClassName"] = PRIORITY_CLASS
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": body}


def nodes(op: CreateNodes, prefix: str, gpus: int, heartbeat: float) -> list[Obj]:
    """Upstream's default Node (4 CPUs, 32 GiB, 110 pods, Ready) with ``gpus`` A100-40GB:
    their vgpu inventory and fresh heartbeat, and for kube-scheduler the same vGPU totals
    as extended resources (``nvidia.com/gpu`` as a device plugin advertises a split GPU,
    ``nvidia.com/gpumem`` in MiB)."""
    out = []
    for i in range(op.count):
        name = f"{prefix}-{i:05d}"
        devices = builders.devices(name, gpus)
        labels = {ZONE: op.zones[i % len(op.zones)]} if op.zones else {}
        node = builders.node(name, devices, cpu="4", memory="32Gi", pods=110,
                             heartbeat=heartbeat, labels=labels)
        for part in ("allocatable", "capacity"):
            node["status"][part]["nvidia.com/gpu"] = str(sum(d.split for d in devices))
            node["status"][part]["nvidia.com/gpumem"] = str(sum(d.memory_mib for d in devices))
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        out.append(node)
    return out


def churn_object(template: str, index: int, namespace: str, scheduler: str
                 ) -> tuple[str, Obj]:
    """(kind, object) of a churn template: upstream's ``config/churn/node-default.yaml``
    (a Ready Node with room for no pod, and no GPU), ``config/churn/service-default.yaml``
    (a Service selecting ``app: foo``) or a pod template."""
    name = f"churn-{template.split('-', 1)[0]}-{index:05d}"
    if template == "node":
        return "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                         "status": {"capacity": {"pods": "0"}, "allocatable": {"pods": "0"},
                                    "conditions": [{"type": "Ready", "status": "True"}]}}
    if template == "service":
        return "services", {"apiVersion": "v1", "kind": "Service",
                            "metadata": {"name": name, "namespace": namespace},
                            "spec": {"selector": {"app": "foo"}, "ports": [
                                {"protocol": "TCP", "port": 8080, "targetPort": 8080}]}}
    return "pods", pod(template, name, namespace, scheduler)
