"""Properties of the two plugins on random clusters.

* Every node InterPodAffinity's Filter accepts satisfies the pod's required terms and the
  existing pods' required anti-affinity, recomputed naively from the pods themselves;
  every node PodTopologySpread accepts keeps each hard constraint within ``maxSkew``.
* The PreFilter extensions are exact: adding a pod gives the state PreFilter computes with
  the pod placed, and removing it again gives the state back.
* Through the whole scheduler, replica sets with anti-affinity or hard spread end in
  placements that honour them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scheduler.affinity_support import (
    affinity,
    handle,
    label_in,
    node_obj,
    pod,
    run_filter,
    snapshot_of,
    spread,
    term,
)
from tests.scheduler.e2e_support import gpu_node, node_of, setup
from vgpu import builders
from vgpu.config import DEFAULT_SCHEDULER_PLUGINS, Config, SchedulerConfig
from vgpu_scheduler.framework.affinity import AffinityTerm, matches_all
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube.interpod_affinity import FILTER_KEY as IPA_KEY
from vgpu_scheduler.plugins.kube.interpod_affinity import InterPodAffinity
from vgpu_scheduler.plugins.kube.pod_topology_spread import FILTER_KEY as SPREAD_KEY
from vgpu_scheduler.plugins.kube.pod_topology_spread import PodTopologySpread
from vgpu_scheduler.plugins.kube.pod_topology_spread.filtering import FilterState as SpreadState

APPS, KEYS = ("a", "b", "c"), ("zone", "rack", "host")
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

node_st = st.fixed_dictionaries({
    "zone": st.sampled_from(["z1", "z2", None]), "rack": st.sampled_from(["r1", "r2", "r3"])})
term_st = st.tuples(st.sampled_from(APPS), st.sampled_from(KEYS))
pod_st = st.fixed_dictionaries({
    "app": st.sampled_from(APPS), "node": st.integers(0, 5),
    "ns": st.sampled_from(["default", "other"]),
    "anti": st.lists(term_st, max_size=1)})
incoming_st = st.fixed_dictionaries({
    "app": st.sampled_from(APPS), "required": st.lists(term_st, max_size=2),
    "anti": st.lists(term_st, max_size=2),
    "spread": st.lists(st.tuples(st.integers(1, 2), st.sampled_from(KEYS),
                                 st.sampled_from(APPS)), max_size=2, unique_by=lambda c: c[1]),
})


def cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
    objs = []
    for i, n in enumerate(nodes):
        labels = {"host": f"h{i}", "rack": n["rack"]}
        if n["zone"] is not None:
            labels["zone"] = n["zone"]
        objs.append(node_obj(f"n{i}", labels))
    existing = [pod(f"e{k}", {"app": p["app"]}, node=f"n{p['node'] % len(nodes)}",
                    namespace=p["ns"],
                    aff=affinity(anti=[term(label_in("app", a), key) for a, key in p["anti"]]))
                for k, p in enumerate(pods)]
    return objs, existing


def incoming_pod(spec: dict[str, Any]) -> PodInfo:
    return pod("in", {"app": spec["app"]}, aff=affinity(
        required=[term(label_in("app", a), k) for a, k in spec["required"]],
        anti=[term(label_in("app", a), k) for a, k in spec["anti"]]),
        constraints=[spread(s, key, {"matchLabels": {"app": a}}) for s, key, a in spec["spread"]])


def same_domain(a: NodeInfo, b: NodeInfo, key: str) -> bool:
    value = a.static.labels.get(key)
    return value is not None and value == b.static.labels.get(key)


def ipa_allows(incoming: PodInfo, node: NodeInfo, nodes: list[NodeInfo]) -> bool:
    """The required rules, straight from their definition."""
    aff = incoming.pod_affinity
    required: tuple[AffinityTerm, ...] = aff.required if aff else ()
    anti = aff.required_anti if aff else ()
    placed = [(n, p.info) for n in nodes for p in n.pods.values()]
    if required:
        if any(t.topology_key not in node.static.labels for t in required):
            return False
        all_match = [(n, p) for n, p in placed if matches_all(required, p.namespace, p.labels)]
        near = all(any(same_domain(node, n, t.topology_key) for n, _ in all_match)
                   for t in required)
        first = not any(n.static.labels.get(t.topology_key) is not None
                        for n, _ in all_match for t in required)
        if not near and not (first and matches_all(required, incoming.namespace,
                                                   incoming.labels)):
            return False
    for n, p in placed:
        if any(t.matches(p.namespace, p.labels) and same_domain(node, n, t.topology_key)
               for t in anti):
            return False
        theirs = p.pod_affinity.required_anti if p.pod_affinity else ()
        if any(t.matches(incoming.namespace, incoming.labels)
               and same_domain(node, n, t.topology_key) for t in theirs):
            return False
    return True


def spread_allows(incoming: PodInfo, node: NodeInfo, nodes: list[NodeInfo]) -> bool:
    keys = [c.topology_key for c in incoming.spread]
    eligible = [n for n in nodes if all(k in n.static.labels for k in keys)]
    for c in incoming.spread:
        if c.topology_key not in node.static.labels:
            return False
        counts = Counter({n.static.labels[c.topology_key]: 0 for n in eligible})
        for n in eligible:
            counts[n.static.labels[c.topology_key]] += sum(
                1 for p in n.pods.values() if p.info.namespace == incoming.namespace
                and c.selects(p.info.labels))
        mine = counts[node.static.labels[c.topology_key]] + c.selects(incoming.labels)
        if mine - min(counts.values(), default=0) > c.max_skew:
            return False
    return True


@SETTINGS
@given(st.lists(node_st, min_size=1, max_size=5), st.lists(pod_st, max_size=8), incoming_st)
def test_accepted_nodes_satisfy_the_hard_rules(nodes: Any, pods: Any, spec: Any) -> None:
    objs, existing = cluster(nodes, pods)
    incoming = incoming_pod(spec)
    for plugin, allows in ((InterPodAffinity(handle()), ipa_allows),
                           (PodTopologySpread(handle()), spread_allows)):
        snap = snapshot_of(plugin, objs, existing)
        status, answers, _ = run_filter(plugin, incoming, snap)
        infos = list(snap)
        for info in infos:
            ok = status.code is Code.SKIP or answers[info.name].ok
            assert ok is allows(incoming, info, infos), (type(plugin).__name__, info.name)


def comparable(state: Any) -> Any:
    """The state with spread counts as plain mappings (arrays do not compare with ==)."""
    if isinstance(state, SpreadState):
        return [(h.constraint, h.self_match, h.minimum,
                 {v: int(h.counts[c]) for v, c in h.code_of.items()
                  if c < len(h.counts) and (h.domains[c] or h.counts[c])})
                for h in state.hard]
    return state


@SETTINGS
@given(st.lists(node_st, min_size=1, max_size=5), st.lists(pod_st, min_size=1, max_size=8),
       incoming_st)
def test_prefilter_extensions_are_exact(nodes: Any, pods: Any, spec: Any) -> None:
    objs, existing = cluster(nodes, pods)
    incoming = incoming_pod(spec)
    added = existing[-1]
    for plugin, key in ((InterPodAffinity(handle()), IPA_KEY),
                        (PodTopologySpread(handle()), SPREAD_KEY)):
        status, _, fresh = run_filter(plugin, incoming, snapshot_of(plugin, objs, existing))
        snap = snapshot_of(plugin, objs, existing[:-1])
        pre, _, state = run_filter(plugin, incoming, snap)
        if Code.SKIP in (status.code, pre.code):
            continue
        before = state.read(key)
        node = snap.get(added.pod["spec"]["nodeName"])
        assert node is not None
        assert plugin.add_pod(state, incoming, NodePod(added), node).ok
        assert comparable(state.read(key)) == comparable(fresh.read(key))
        assert plugin.remove_pod(state, incoming, NodePod(added), node).ok
        assert comparable(state.read(key)) == comparable(before)


CONFIG = Config(scheduler=SchedulerConfig(
    plugins=tuple(p for p in DEFAULT_SCHEDULER_PLUGINS if p != "AllocationGate")))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["z1", "z2", "z3"]), min_size=2, max_size=6),
       st.integers(1, 8), st.integers(1, 2), st.sampled_from(["anti", "spread"]))
def test_placed_replicas_honour_their_rules(zones: list[str], replicas: int, skew: int,
                                            rule: str) -> None:
    nodes = [gpu_node(f"n{i}", 2, labels={"zone": z}) for i, z in enumerate(zones)]
    sched, cluster, _ = setup(nodes, CONFIG)
    rules: dict[str, Any] = (
        {"affinity": affinity(anti=[term(label_in("app", "r"), "zone")])} if rule == "anti"
        else {"topologySpreadConstraints": [spread(skew, "zone", {"matchLabels": {"app": "r"}})]})
    for i in range(replicas):
        obj = builders.pod(f"r-{i}", **rules)
        obj["metadata"]["labels"] = {"app": "r"}
        cluster.create("pods", obj)
        sched.run_until_idle()
    zone_of = dict(enumerate(zones))
    placed = Counter(zone_of[int(n[1:])] for i in range(replicas)
                     if (n := node_of(cluster, f"r-{i}")) is not None)
    counts = [placed.get(z, 0) for z in set(zones)]
    if rule == "anti":
        assert max(counts) <= 1 and sum(counts) == min(replicas, len(set(zones)))
    else:
        assert max(counts) - min(counts) <= skew
