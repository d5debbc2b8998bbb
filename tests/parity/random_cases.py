"""Seeded random scheduling problems for the differential test against kube-scheduler.

A case is a small cluster (nodes with zones, labels, taints, an unschedulable flag and
capacity of every resource kind: CPU, memory, pods, ephemeral storage, hugepages, an
extended resource and whole GPUs), pods bound to it directly (running, terminating or
completed, some in a second namespace) and one new pod with a random mix of rules
(requests of every kind, init containers, a RuntimeClass's overhead, node selector and
affinity, tolerations, host ports, pod affinity and anti-affinity, topology spread).
Everything stays inside what kube-scheduler v1.20's API server accepts.

Case ``index`` of seed ``seed`` depends on nothing else, so one case replays alone. Node
names and namespaces are placeholders (``@node:2``, ``@ns``, ``@other``) that
:mod:`tests.parity.case_objects` fills in for each layout.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
FPGA = "example.com/fpga"
HUGEPAGES = "hugepages-2Mi"
GPU = "nvidia.com/gpu"
#: The RuntimeClass whose overhead the admission adds to a pod (created by the test).
RUNTIME_CLASS = "parity-overhead"
RUNTIME_OVERHEAD = {"cpu": "250m", "memory": "128Mi"}

RUNNING, TERMINATING, COMPLETED = "running", "terminating", "completed"
OTHER = "@other"


def node_ref(index: int) -> str:
    return f"@node:{index}"


@dataclass(frozen=True)
class NodeSpec:
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]
    unschedulable: bool
    allocatable: Mapping[str, str]
    gpus: int


@dataclass(frozen=True)
class PodSpec:
    labels: Mapping[str, str]
    #: ``spec`` without ``nodeName``, ``schedulerName`` or the run's node selector.
    spec: Mapping[str, Any]
    #: Where an existing pod is bound; None for the new pod.
    node: int | None = None
    other_namespace: bool = False
    state: str = RUNNING


@dataclass(frozen=True)
class Case:
    seed: int
    index: int
    nodes: tuple[NodeSpec, ...]
    existing: tuple[PodSpec, ...]
    pod: PodSpec
    #: What was done to the generated case (a documented difference's transform, a probe).
    notes: tuple[str, ...] = field(default=())
    #: The one node the pod's soft rules single out, where both schedulers must bind it
    #: (:mod:`tests.parity.large_cases`); None: only the hard rules are compared.
    best: int | None = None


TAINTS = (
    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
    {"key": "maint", "effect": "NoExecute"},
    {"key": "spare", "value": "yes", "effect": "PreferNoSchedule"},
    {"key": "gpu", "value": "reserved", "effect": "NoSchedule"},
)


def _maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def _node(rng: random.Random) -> NodeSpec:
    labels = {}
    if _maybe(rng, 0.85):
        labels[ZONE] = rng.choice(["z0", "z1", "z2"])
    if _maybe(rng, 0.6):
        labels["disk"] = rng.choice(["ssd", "hdd"])
    if _maybe(rng, 0.7):
        labels["gen"] = str(rng.randint(1, 5))
    alloc = {"cpu": rng.choice(["1", "2", "4", "8"]),
             "memory": rng.choice(["1Gi", "2Gi", "4Gi", "8Gi"]),
             "pods": rng.choice(["2", "3", "5", "110", "110"])}
    alloc["ephemeral-storage"] = rng.choice(["1Gi", "10Gi", "100Gi"])
    for name, values in ((HUGEPAGES, ["0", "8Mi"]), (FPGA, ["0", "1", "2"])):
        if _maybe(rng, 0.6):
            alloc[name] = rng.choice(values)
    taints = tuple(t for t in TAINTS if _maybe(rng, 0.08))
    return NodeSpec(labels, taints, _maybe(rng, 0.05), alloc, rng.choice([0, 0, 1, 2]))


def _selector(rng: random.Random) -> dict[str, Any] | None:
    """A label selector as users write them, ``{}`` and a missing one included."""
    roll = rng.random()
    if roll < 0.08:
        return None
    if roll < 0.25:
        return {}
    if roll < 0.6:
        return {"matchLabels": {"app": rng.choice("abc")}}
    return {"matchExpressions": [rng.choice([
        {"key": "app", "operator": "In", "values": rng.sample("abc", 2)},
        {"key": "app", "operator": "NotIn", "values": ["c"]},
        {"key": "tier", "operator": "Exists"},
        {"key": "tier", "operator": "DoesNotExist"},
    ])]}


def _term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": rng.choice([ZONE, HOSTNAME])}
    selector = _selector(rng)
    if selector is not None:
        term["labelSelector"] = selector
    if _maybe(rng, 0.15):
        term["namespaces"] = [OTHER] if _maybe(rng, 0.5) else ["@ns", OTHER]
    return term


def _labels(rng: random.Random) -> dict[str, str]:
    labels = {}
    if _maybe(rng, 0.85):
        labels["app"] = rng.choice("abc")
    if _maybe(rng, 0.4):
        labels["tier"] = rng.choice("xy")
    return labels


def _container(rng: random.Random, name: str, *, new: bool) -> dict[str, Any]:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    cpu = rng.choice([None, "100m", "500m", "1", "3"] if new else [None, "100m", "500m", "1", "2"])
    memory = rng.choice([None, None, "256Mi", "512Mi", "1Gi", "3Gi"] if new
                        else [None, "256Mi", "1Gi", "2Gi"])
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    if _maybe(rng, 0.25):
        requests["ephemeral-storage"] = rng.choice(["512Mi", "1Gi", "8Gi"])
    if _maybe(rng, 0.1):
        # Hugepages are not overcommitted (limits = requests) and need memory or CPU.
        limits[HUGEPAGES] = rng.choice(["2Mi", "8Mi"])
        requests.setdefault("memory", "64Mi")
    if _maybe(rng, 0.15):
        limits[FPGA] = rng.choice(["0", "1", "2"] if new else ["1", "2"])
    if new and _maybe(rng, 0.15):
        limits[GPU] = str(rng.choice([1, 2]))
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    container: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if _maybe(rng, 0.15):
        container["ports"] = [{"containerPort": 8080, "hostPort": rng.choice([8080, 9090]),
                               "protocol": rng.choice(["TCP", "TCP", "UDP"])}]
    return container


def _existing(rng: random.Random, nodes: int) -> PodSpec:
    spec: dict[str, Any] = {"containers": [_container(rng, "main", new=False)]}
    if _maybe(rng, 0.15):
        spec["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}}
    roll = rng.random()
    state = TERMINATING if roll < 0.1 else COMPLETED if roll < 0.2 else RUNNING
    return PodSpec(_labels(rng), spec, rng.randrange(nodes), _maybe(rng, 0.12), state)


def _expression(rng: random.Random, nodes: int) -> dict[str, Any]:
    return rng.choice([
        {"key": ZONE, "operator": "In", "values": rng.sample(["z0", "z1", "z2"], 2)},
        {"key": ZONE, "operator": "NotIn", "values": [rng.choice(["z0", "z1", "z2"])]},
        {"key": "disk", "operator": "Exists"},
        {"key": "disk", "operator": "DoesNotExist"},
        {"key": "gen", "operator": "Gt", "values": [str(rng.randint(1, 4))]},
        {"key": "gen", "operator": "Lt", "values": [str(rng.randint(2, 5))]},
        {"key": HOSTNAME, "operator": "In", "values": [node_ref(rng.randrange(nodes))]},
    ])


def _node_affinity(rng: random.Random, nodes: int) -> dict[str, Any]:
    terms = []
    for _ in range(rng.choice([1, 1, 2])):
        term: dict[str, Any] = {"matchExpressions": [
            _expression(rng, nodes) for _ in range(rng.choice([1, 1, 2]))]}
        if _maybe(rng, 0.1):
            term = {"matchFields": [{"key": "metadata.name", "operator": "In",
                                     "values": [node_ref(rng.randrange(nodes))]}]}
        terms.append(term)
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def _tolerations(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for taint in TAINTS:
        if _maybe(rng, 0.35):
            toleration = {"key": taint["key"], "operator": "Exists"}
            if "value" in taint and _maybe(rng, 0.5):
                toleration = {"key": taint["key"], "operator": "Equal", "value": taint["value"]}
            if _maybe(rng, 0.5):
                toleration["effect"] = taint["effect"]
            out.append(toleration)
    if _maybe(rng, 0.05):
        out.append({"operator": "Exists"})
    if _maybe(rng, 0.05):
        out.append({"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                    "effect": "NoSchedule"})
    return out


def _spread(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for key in rng.sample([ZONE, HOSTNAME], rng.choice([1, 1, 2])):
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice([1, 1, 2]), "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule" if _maybe(rng, 0.85) else "ScheduleAnyway"}
        selector = _selector(rng)
        if selector is not None:
            constraint["labelSelector"] = selector
        out.append(constraint)
    return out


def _new_pod(rng: random.Random, nodes: int) -> PodSpec:
    spec: dict[str, Any] = {"containers": [_container(rng, "main", new=True)]}
    if _maybe(rng, 0.15):
        init = _container(rng, "init", new=True)
        init.pop("ports", None)
        init["resources"].get("limits", {}).pop(GPU, None)
        spec["initContainers"] = [init]
    if _maybe(rng, 0.1):
        spec["runtimeClassName"] = RUNTIME_CLASS
    if _maybe(rng, 0.1):
        spec["nodeSelector"] = {"disk": "ssd"}
    affinity: dict[str, Any] = {}
    if _maybe(rng, 0.2):
        affinity["nodeAffinity"] = _node_affinity(rng, nodes)
    for kind in ("podAffinity", "podAntiAffinity"):
        if _maybe(rng, 0.15):
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}
    if affinity:
        spec["affinity"] = affinity
    if tolerations := _tolerations(rng):
        spec["tolerations"] = tolerations
    if _maybe(rng, 0.35):
        spec["topologySpreadConstraints"] = _spread(rng)
    return PodSpec(_labels(rng), spec)


def generate(seed: int, index: int) -> Case:
    """Case ``index`` of ``seed``."""
    rng = random.Random(f"vgpu-parity:{seed}:{index}")
    nodes = tuple(_node(rng) for _ in range(rng.randint(2, 5)))
    existing = tuple(_existing(rng, len(nodes)) for _ in range(rng.randint(0, 8)))
    return Case(seed, index, nodes, existing, _new_pod(rng, len(nodes)))


if __name__ == "__main__":
    import dataclasses
    import json
    import sys

    print(json.dumps(dataclasses.asdict(generate(int(sys.argv[1]), int(sys.argv[2]))),
                     indent=2))
