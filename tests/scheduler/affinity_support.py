"""Building blocks for the InterPodAffinity and PodTopologySpread tables: pods and nodes in
API shape, a snapshot of them, and the plugins run the way the framework runs them.

Every Filter run also checks that the PreFilter mask agrees with Filter on every node:
the framework skips masked nodes, so a mask that disagrees would change decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tests.scheduler.helpers import FakeHandle, FakeLister
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod, parse_node
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import Code, Status

NOW = 1_800_000_000.0
Selector = dict[str, Any]


# -- API objects --------------------------------------------------------------------------

def exists(*keys: str) -> Selector:
    return {"matchExpressions": [{"key": k, "operator": "Exists"} for k in keys]}


def label_in(key: str, *values: str) -> Selector:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def label_not_in(key: str, *values: str) -> Selector:
    return {"matchExpressions": [{"key": key, "operator": "NotIn", "values": list(values)}]}


def term(selector: Selector | None, key: str, *, namespaces: Sequence[str] | None = None,
         ns_selector: Selector | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": key}
    if selector is not None:
        out["labelSelector"] = selector
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if ns_selector is not None:
        out["namespaceSelector"] = ns_selector
    return out


def weighted(weight: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": body}


def affinity(required: Iterable[dict[str, Any]] = (), anti: Iterable[dict[str, Any]] = (),
             preferred: Iterable[dict[str, Any]] = (),
             preferred_anti: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, req, pref in (("podAffinity", required, preferred),
                             ("podAntiAffinity", anti, preferred_anti)):
        body = {}
        if req := list(req):
            body["requiredDuringSchedulingIgnoredDuringExecution"] = req
        if pref := list(pref):
            body["preferredDuringSchedulingIgnoredDuringExecution"] = pref
        if body:
            out[field] = body
    return out


def spread(max_skew: int, key: str, selector: Selector | None, *, hard: bool = True,
           **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key,
                           "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway"}
    if selector is not None:
        out["labelSelector"] = selector
    return {**out, **extra}


def pod_obj(name: str = "p", labels: Mapping[str, str] | None = None, *,
            namespace: str = "default", node: str | None = None,
            aff: dict[str, Any] | None = None, constraints: Sequence[dict[str, Any]] = (),
            terminating: bool = False, **spec: Any) -> Obj:
    obj = builders.pod(name, [builders.container(gpus=None)], namespace=namespace, **spec)
    obj["metadata"]["labels"] = dict(labels or {})
    obj["metadata"]["uid"] = f"uid-{namespace}-{name}"
    if node is not None:
        obj["spec"]["nodeName"] = node
    if aff:
        obj["spec"]["affinity"] = aff
    if constraints:
        obj["spec"]["topologySpreadConstraints"] = list(constraints)
    if terminating:
        obj["metadata"]["deletionTimestamp"] = "2027-01-01T00:00:00Z"
    return obj


def pod(name: str = "p", labels: Mapping[str, str] | None = None, **kw: Any) -> PodInfo:
    info = parse(pod_obj(name, labels, **kw), Config())
    assert info.error is None, info.error
    return info


def node_obj(name: str, labels: Mapping[str, str] | None = None,
             taints: Sequence[Mapping[str, str]] = ()) -> Obj:
    """A node with exactly ``labels`` (no automatic hostname label)."""
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]} if taints else {}
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec,
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}


UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def namespace(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels}}


# -- snapshot and plugins -----------------------------------------------------------------

def snapshot_of(plugin: Any, nodes: Sequence[Obj], pods: Sequence[PodInfo | Obj] = ()) -> Snapshot:
    """The nodes with the pods that name them in ``spec.nodeName``, with the plugin's
    columns."""
    infos = [p if isinstance(p, PodInfo) else parse(p, Config()) for p in pods]
    snap = Snapshot(plugin.columns())
    for obj in nodes:
        static = parse_node(obj)
        on = {i.pod_id: NodePod(i) for i in infos if i.pod["spec"].get("nodeName") == static.name}
        snap.set(NodeInfo.of(static, 1.0, on))
    return snap


def handle(config: Config | None = None, **listers: Sequence[Obj]) -> FakeHandle:
    out = FakeHandle(config)
    for kind, objects in listers.items():
        out.listers[kind] = FakeLister(list(objects))
    return out


def run_filter(plugin: Any, pod_info: PodInfo,
               snap: Snapshot) -> tuple[Status, dict[str, Status], CycleState]:
    """PreFilter, then Filter on every node: (PreFilter status, Filter status by node)."""
    state = CycleState(NOW, snap)
    result, status = plugin.pre_filter(state, pod_info, snap)
    if status.code is not Code.SUCCESS:
        return status, {}, state
    answers = {n.name: plugin.filter(state, pod_info, n) for n in snap}
    if result is not None and result.mask is not None:
        for n in snap:
            fits = answers[n.name].code is Code.SUCCESS
            assert bool(result.mask[snap.positions[n.name]]) is fits, n.name
    return status, answers, state


def codes(answers: Mapping[str, Status]) -> dict[str, Code]:
    return {name: s.code for name, s in answers.items()}


def run_score(plugin: Any, pod_info: PodInfo, snap: Snapshot,
              feasible: Sequence[str] | None = None) -> dict[str, float] | Status:
    """PreScore over ``feasible`` (default every node), Score, NormalizeScore; the
    PreScore status when it does not succeed. A plugin that also scores many nodes at
    once (``score_nodes``, what the framework calls) must give the same scores."""
    state = CycleState(NOW, snap)
    nodes = [n for n in snap if feasible is None or n.name in feasible]
    if feasible is not None:
        nodes.sort(key=lambda n: list(feasible).index(n.name))
    status = plugin.pre_score(state, pod_info, nodes)
    bulk = None
    if hasattr(plugin, "score_nodes"):
        positions = np.array([snap.positions[n.name] for n in nodes], dtype=np.int64)
        bulk = plugin.score_nodes(CycleState(NOW, snap), pod_info, snap, positions)
    if status.code is not Code.SUCCESS:
        assert bulk is None, bulk
        return status
    values = [plugin.score(state, pod_info, n) for n in nodes]
    plugin.normalize_scores(state, pod_info, values)
    if hasattr(plugin, "score_nodes"):
        assert bulk is not None and bulk.tolist() == values, (bulk, values)
    return {n.name: v for n, v in zip(nodes, values, strict=True)}


def mask_of(result: Any, snap: Snapshot) -> dict[str, bool]:
    return {n.name: bool(np.asarray(result.mask)[snap.positions[n.name]]) for n in snap}
