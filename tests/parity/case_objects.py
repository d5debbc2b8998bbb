"""A random case (:mod:`tests.parity.random_cases`) as API objects, and the changes made
to a case to explain a disagreement or to ask about one node.

:func:`render` fills the placeholders for one layout: its nodes (labelled with the
layout's run, which its new pod selects), its two namespaces and the scheduler's name.
The documented version differences (docs/scheduler.md#known-differences) each come with a
*neutralizing* change: a change of the case that current kube-scheduler's rules (vgpu's)
do not see, but that takes away what kube-scheduler v1.20 reads differently. A
disagreement is a documented difference when, with the change, both schedulers agree
and vgpu decides as before.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.parity.random_cases import (
    COMPLETED,
    GPU,
    OTHER,
    RUNNING,
    TERMINATING,
    Case,
    NodeSpec,
    PodSpec,
)
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu_scheduler.framework import compute
from vgpu_scheduler.framework.nodeinfo import parse_node
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.plugins.helper.node_affinity import matches

RUN = "parity.vgpu.io/run"
HOLD = "parity.vgpu.io/hold"
NEW = "new"


@dataclass(frozen=True)
class Names:
    """Where one layout of a case goes."""

    run: str
    namespace: str
    other: str
    scheduler: str

    def node(self, index: int) -> str:
        return f"d{self.run}-{index}"

    def pod(self, index: int) -> str:
        return f"e{index}"


def fill(value: Any, names: Names) -> Any:
    """``value`` with the placeholders replaced."""
    if isinstance(value, Mapping):
        return {k: fill(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [fill(v, names) for v in value]
    if value == "@ns":
        return names.namespace
    if value == OTHER:
        return names.other
    if isinstance(value, str) and value.startswith("@node:"):
        return names.node(int(value.split(":", 1)[1]))
    return value


def node_object(spec: NodeSpec, name: str, run: str) -> Obj:
    gpus = builders.devices(name, spec.gpus)
    node = builders.node(name, gpus, cpu=spec.allocatable["cpu"],
                         memory=spec.allocatable["memory"], pods=int(spec.allocatable["pods"]),
                         heartbeat=time.time(), labels={RUN: run, **spec.labels},
                         taints=spec.taints, unschedulable=spec.unschedulable)
    extra = {k: v for k, v in spec.allocatable.items() if k not in ("cpu", "memory", "pods")}
    if spec.gpus:
        extra[GPU] = str(spec.gpus)
    for part in ("allocatable", "capacity"):
        node["status"][part].update(extra)
    return node


def pod_object(spec: PodSpec, name: str, names: Names) -> Obj:
    body: dict[str, Any] = {**fill(spec.spec, names), "automountServiceAccountToken": False,
                            "terminationGracePeriodSeconds": 0}
    if spec.node is None:
        body["schedulerName"] = names.scheduler
        body["nodeSelector"] = {**body.get("nodeSelector", {}), RUN: names.run}
    else:
        body["nodeName"] = names.node(spec.node)
    metadata: dict[str, Any] = {"name": name, "labels": dict(spec.labels),
                                "namespace": names.other if spec.other_namespace
                                else names.namespace}
    if spec.state == TERMINATING:
        metadata["finalizers"] = [HOLD]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def render(case: Case, names: Names) -> tuple[list[Obj], list[tuple[Obj, str]], Obj]:
    """(nodes, existing pods with their state, the new pod)."""
    nodes = [node_object(n, names.node(i), names.run) for i, n in enumerate(case.nodes)]
    existing = [(pod_object(p, names.pod(i), names), p.state)
                for i, p in enumerate(case.existing)]
    return nodes, existing, pod_object(case.pod, NEW, names)


# -- changes of a case ---------------------------------------------------------------------

_DUMMY = Names("x", "ns", "other", "s")


def only_node(case: Case, index: int) -> Case:
    """The case with every other node full (``pods: 0``): the new pod can go to node
    ``index`` or nowhere. Nothing else any rule reads changes."""
    nodes = tuple(n if i == index else dataclasses.replace(
        n, allocatable={**n.allocatable, "pods": "0"}) for i, n in enumerate(case.nodes))
    return dataclasses.replace(case, nodes=nodes, notes=(*case.notes, f"only node {index}"))


def _format(name: str, value: int) -> str:
    return f"{value}m" if name == compute.CPU else str(value)


def raise_overcommitted(case: Case) -> Case | None:
    """Every node whose pods take more of a resource than it has gets that much of it.

    kube-scheduler v1.20 refused a pod asking zero of such a resource (``0 > allocatable -
    requested``); current kube-scheduler never refuses a zero request, and a node with
    nothing left refuses every non-zero one, overcommitted or not."""
    taken: list[dict[str, int]] = [{} for _ in case.nodes]
    for pod in case.existing:
        if pod.state == COMPLETED or pod.node is None:
            continue
        asked = compute.pod_requests({"spec": pod.spec})
        for name, value in (("cpu", asked.cpu), ("memory", asked.memory), *asked.other.items()):
            taken[pod.node][name] = taken[pod.node].get(name, 0) + value
    nodes = []
    for node, used in zip(case.nodes, taken, strict=True):
        alloc = dict(node.allocatable)
        for name, value in used.items():
            has = compute.amount(name, alloc[name], name) if name in alloc else 0
            if value > has:
                alloc[name] = _format(name, value)
        nodes.append(dataclasses.replace(node, allocatable=alloc))
    if tuple(nodes) == case.nodes:
        return None
    return dataclasses.replace(case, nodes=tuple(nodes),
                               notes=(*case.notes, "overcommitted resources raised"))


def drop_ineligible_spread_pods(case: Case) -> Case | None:
    """Without the running pods of the new pod's namespace that a hard spread constraint
    selects on nodes that are no domain of it (the pod's node selector or affinity rules
    them out, or they lack a constraint's key).

    kube-scheduler v1.20 counted them whenever their node's value was also an eligible
    node's; current kube-scheduler (nodeAffinityPolicy Honor) counts pods on eligible
    nodes only, so it does not see them."""
    config = Config()
    incoming = parse(pod_object(case.pod, NEW, _DUMMY), config)
    hard = [c for c in incoming.spread if c.when_unsatisfiable == "DoNotSchedule"]
    if not hard:
        return None
    keys = [c.topology_key for c in hard]
    eligible = []
    for i, spec in enumerate(case.nodes):
        node = parse_node(node_object(spec, _DUMMY.node(i), _DUMMY.run))
        eligible.append(all(k in node.labels for k in keys) and matches(
            node.labels, node.name, incoming.node_selector, incoming.required_terms))
    kept = []
    for i, pod in enumerate(case.existing):
        if (pod.node is not None and not eligible[pod.node] and pod.state == RUNNING
                and not pod.other_namespace):
            info = parse(pod_object(pod, _DUMMY.pod(i), _DUMMY), config)
            if any(c.selects(info.labels) for c in hard):
                continue
        kept.append(pod)
    if len(kept) == len(case.existing):
        return None
    return dataclasses.replace(case, existing=tuple(kept),
                               notes=(*case.notes, "ineligible spread pods dropped"))


@dataclass(frozen=True)
class Difference:
    """A documented difference between kube-scheduler v1.20 and current kube-scheduler
    (which vgpu follows), and the change of a case that takes it away."""

    key: str
    what: str
    changed_in: str
    neutralize: Callable[[Case], Case | None]


DIFFERENCES = (
    Difference("zero-request", "v1.20 refuses a zero request of a resource the node's pods "
               "already take more of than it has", "1.28 (kubernetes#116408; extended "
               "resources: kubernetes#111544)", raise_overcommitted),
    Difference("spread-ineligible-nodes", "v1.20's topology spread counts matching pods on "
               "nodes the pod's node selector or affinity rules out", "1.24 "
               "(kubernetes#107009)", drop_ineligible_spread_pods),
)


def neutralized(case: Case) -> list[tuple[tuple[Difference, ...], Case]]:
    """Each documented difference's change that applies to the case, then all of them
    together when more than one applies."""
    single = [(d, changed) for d in DIFFERENCES if (changed := d.neutralize(case)) is not None]
    out = [((d,), changed) for d, changed in single]
    if len(single) > 1:
        combined = case
        for d, _ in single:
            combined = d.neutralize(combined) or combined
        out.append((tuple(d for d, _ in single), combined))
    return out
