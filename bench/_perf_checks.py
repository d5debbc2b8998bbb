"""The end state of one ``bench/scheduler_perf.py`` run, checked against every pod's own
constraints: the hard rules (each broken one counted) and the soft rules' measures.

Written on its own, from the Kubernetes API's definitions, rather than with the
scheduler's plugins: a check that shared their code would share their mistakes. Pure:
it reads the Nodes and Pods listed at the end of a run.

Hard rules, each a count of pods (or nodes) that break it:

- ``unbound``: a pod of a step that waits for its pods (not upstream's
  ``skipWaitToCompletion``) still pending;
- ``unknown_node``: bound to a node that does not exist;
- ``node_resources``: a node whose bound pods ask for more of a resource than it has
  allocatable (CPU, memory, pods, and the extended ``nvidia.com/*`` totals);
- ``gpu_capacity`` (pods bound by vgpu-scheduler): a pod without a valid assignment on its
  node, or a GPU given more memory, compute or tasks than its inventory holds;
- ``node_affinity``: a node that fails the pod's ``nodeSelector`` or required node affinity;
- ``pod_affinity``: a pod with required pod affinity and no matching pod beside it in its
  topology domain while matching pods are elsewhere (the first such pod may go anywhere);
- ``pod_anti_affinity``: a pod sharing its topology domain with a pod that one of the two
  has required anti-affinity to;
- ``topology_spread``: a ``DoNotSchedule`` constraint whose skew is over ``maxSkew``.

Soft measures, per rule found on the pods (``preferred`` pod affinity and anti-affinity,
``ScheduleAnyway`` spread) and for the run as a whole: most matching pods in one domain,
the share alone in theirs (anti-affinity) or beside another (affinity), the spread's
skew, nodes used.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vgpu import codecs
from vgpu.errors import CodecError
from vgpu.quantity import parse_quantity

Obj = Mapping[str, Any]
HARD = ("unbound", "unknown_node", "node_resources", "gpu_capacity", "node_affinity",
        "pod_affinity", "pod_anti_affinity", "topology_spread")


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector: matchLabels and matchExpressions, all of them (none: nothing)."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or ():
        present, values = expr["key"] in labels, expr.get("values") or ()
        ok = {"In": present and labels.get(expr["key"]) in values,
              "NotIn": not present or labels.get(expr["key"]) not in values,
              "Exists": present, "DoesNotExist": not present}[expr["operator"]]
        if not ok:
            return False
    return True


def node_term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A NodeSelectorTerm's matchExpressions (Gt/Lt compare integers)."""
    for expr in term.get("matchExpressions") or ():
        key, op, values = expr["key"], expr["operator"], expr.get("values") or ()
        value = labels.get(key)
        if op in ("Gt", "Lt"):
            try:
                ok = value is not None and (int(value) > int(values[0]) if op == "Gt"
                                            else int(value) < int(values[0]))
            except ValueError:
                ok = False
        else:
            ok = matches({"matchExpressions": [expr]}, labels)
        if not ok:
            return False
    return bool(term.get("matchExpressions"))


def _labels(obj: Obj) -> Mapping[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _ns(pod: Obj) -> str:
    return str(pod["metadata"]["namespace"])


def _requests(pod: Obj) -> Counter[str]:
    total: Counter[str] = Counter()
    for c in pod["spec"].get("containers") or ():
        res = c.get("resources") or {}
        # The API server defaults a request to its limit; a list returns it defaulted.
        for name, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[name] += parse_quantity(value)
    total["pods"] += 1
    return total


class _Cluster:
    """Nodes by name, bound pods by node and by (topology key, value)."""

    def __init__(self, nodes: Sequence[Obj], pods: Sequence[Obj]) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.bound = [p for p in pods if p["spec"].get("nodeName")]
        self.on_node: dict[str, list[Obj]] = defaultdict(list)
        for p in self.bound:
            self.on_node[p["spec"]["nodeName"]].append(p)

    def domain(self, pod: Obj, key: str) -> str | None:
        node = self.nodes.get(pod["spec"]["nodeName"])
        return None if node is None else _labels(node).get(key)

    def domains(self, key: str) -> set[str]:
        return {v for n in self.nodes.values() if (v := _labels(n).get(key)) is not None}

    def by_domain(self, key: str, selected: Iterable[Obj]) -> Counter[str]:
        counts: Counter[str] = Counter()
        for p in selected:
            if (d := self.domain(p, key)) is not None:
                counts[d] += 1
        return counts


def _term_pods(c: _Cluster, pod: Obj, term: Mapping[str, Any]) -> list[Obj]:
    namespaces = set(term.get("namespaces") or ()) or {_ns(pod)}
    return [p for p in c.bound if _ns(p) in namespaces
            and matches(term.get("labelSelector"), _labels(p))]


def _affinity(pod: Obj, kind: str, mode: str) -> list[Mapping[str, Any]]:
    terms = ((pod["spec"].get("affinity") or {}).get(kind) or {}).get(mode) or []
    return [t.get("podAffinityTerm", t) for t in terms]


def _node_fits(pod: Obj, node: Obj) -> bool:
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
        return False
    required = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    return required is None or any(node_term_matches(t, labels)
                                   for t in required.get("nodeSelectorTerms") or ())


def _gpu_breaches(c: _Cluster) -> int:
    breaches, per_gpu, capacity = 0, [], {}
    for name, node in c.nodes.items():
        raw = (node["metadata"].get("annotations") or {}).get("vgpu.io/node-gpus")
        if raw:
            for d in codecs.decode_inventory(raw).devices:
                capacity[d.uuid] = (name, d.memory_mib, d.cores, d.split)
    for p in c.bound:
        try:
            a = codecs.decode_assignment(p["metadata"]["annotations"]["vgpu.io/assignment"])
        except (KeyError, CodecError):
            breaches += 1
            continue
        if a.node != p["spec"]["nodeName"]:
            breaches += 1
        per_gpu.extend(g for grants in a.containers.values() for g in grants)
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for g in per_gpu:
        u = used[g.uuid]
        u[0], u[1], u[2] = u[0] + g.memory_mib, u[1] + g.cores, u[2] + 1
    for uuid, (mem, cores, tasks) in used.items():
        cap = capacity.get(uuid)
        if cap is None or mem > cap[1] or cores > cap[2] or tasks > cap[3]:
            breaches += 1
    return breaches


def hard_rules(nodes: Sequence[Obj], pods: Sequence[Obj], *, waited: Iterable[str],
               gpu_assignments: bool) -> dict[str, int]:
    """Per rule of :data:`HARD`, how many pods (``node_resources``: nodes; ``gpu_capacity``:
    pods and GPUs; ``topology_spread``: constraints) break it. ``waited``: the
    ``namespace/name`` of every pod that had to be bound."""
    c = _Cluster(nodes, pods)
    key = {f"{_ns(p)}/{p['metadata']['name']}": p for p in pods}
    out = dict.fromkeys(HARD, 0)
    out["unbound"] = sum(1 for k in waited if k in key and not key[k]["spec"].get("nodeName"))
    out["unknown_node"] = sum(1 for p in c.bound if p["spec"]["nodeName"] not in c.nodes)
    for name, on in c.on_node.items():
        node = c.nodes.get(name)
        if node is None:
            continue
        asked: Counter[str] = sum((_requests(p) for p in on), Counter())
        have = node["status"].get("allocatable") or {}
        if any(v > parse_quantity(have.get(r, 0)) for r, v in asked.items()
               if r in ("cpu", "memory", "pods") or r in have or r.startswith("nvidia.com/")):
            out["node_resources"] += 1
    if gpu_assignments:
        out["gpu_capacity"] = _gpu_breaches(c)
    for p in c.bound:
        node = c.nodes.get(p["spec"]["nodeName"])
        if node is not None and not _node_fits(p, node):
            out["node_affinity"] += 1
        out["pod_anti_affinity"] += _anti_breach(c, p)
        out["pod_affinity"] += _affinity_breach(c, p)
    out["topology_spread"] = sum(1 for s in spreads(c, "DoNotSchedule")
                                 if s["skew"] > s["max_skew"])
    return out


def _anti_breach(c: _Cluster, pod: Obj) -> int:
    """1 if ``pod`` shares a domain with a pod its own required anti-affinity names (the
    other direction is that pod's own check)."""
    for term in _affinity(pod, "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        here = c.domain(pod, term["topologyKey"])
        if here is not None and any(o is not pod and c.domain(o, term["topologyKey"]) == here
                                    for o in _term_pods(c, pod, term)):
            return 1
    return 0


def _affinity_breach(c: _Cluster, pod: Obj) -> int:
    for term in _affinity(pod, "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        others = [o for o in _term_pods(c, pod, term) if o is not pod]
        here = c.domain(pod, term["topologyKey"])
        if others and not any(c.domain(o, term["topologyKey"]) == here for o in others):
            return 1
    return 0


def _groups(c: _Cluster, kind: str, mode: str) -> dict[str, tuple[Obj, Mapping[str, Any]]]:
    """Each distinct term (selector, key, namespaces) with a pod that carries it."""
    out: dict[str, tuple[Obj, Mapping[str, Any]]] = {}
    for p in c.bound:
        for term in _affinity(p, kind, mode):
            ns = sorted(term.get("namespaces") or [_ns(p)])
            sig = json.dumps([term.get("labelSelector"), term["topologyKey"], ns], sort_keys=True)
            out.setdefault(sig, (p, term))
    return out


def spreads(c: _Cluster, when: str) -> list[dict[str, Any]]:
    """Each distinct spread constraint of ``when``: its skew over the domains of nodes
    that carry its key (upstream counts only nodes the pod's node affinity passes; the
    workloads here have none beside their spread)."""
    seen: dict[str, dict[str, Any]] = {}
    for p in c.bound:
        for s in p["spec"].get("topologySpreadConstraints") or ():
            if s["whenUnsatisfiable"] != when:
                continue
            sig = json.dumps([_ns(p), s["labelSelector"], s["topologyKey"]], sort_keys=True)
            if sig in seen:
                continue
            selected = [o for o in c.bound if _ns(o) == _ns(p)
                        and matches(s["labelSelector"], _labels(o))]
            counts = c.by_domain(s["topologyKey"], selected)
            values = [counts.get(d, 0) for d in c.domains(s["topologyKey"])] or [0]
            seen[sig] = {"key": s["topologyKey"], "max_skew": s["maxSkew"],
                         "skew": max(values) - min(values), "pods": len(selected)}
    return list(seen.values())


def soft_measures(nodes: Sequence[Obj], pods: Sequence[Obj]) -> dict[str, Any]:
    """What the soft rules asked for and what each got, plus the run's spread over nodes."""
    c = _Cluster(nodes, pods)
    out: dict[str, Any] = {}
    mode = "preferredDuringSchedulingIgnoredDuringExecution"
    for label, kind in (("preferred_anti_affinity", "podAntiAffinity"),
                        ("preferred_affinity", "podAffinity")):
        rows = []
        for pod, term in _groups(c, kind, mode).values():
            counts = c.by_domain(term["topologyKey"], _term_pods(c, pod, term))
            n, domains = sum(counts.values()), len(c.domains(term["topologyKey"]))
            rows.append({"key": term["topologyKey"], "pods": n,
                         "max_per_domain": max(counts.values(), default=0),
                         "even": math.ceil(n / domains) if domains else 0,
                         "alone_share": round(sum(1 for v in counts.values() if v == 1)
                                              / n, 3) if n else 0.0,
                         "domains_used": len(counts)})
        if rows:
            out[label] = rows
    if rows := spreads(c, "ScheduleAnyway"):
        out["schedule_anyway_spread"] = rows
    per_node = [len(v) for k, v in c.on_node.items() if k in c.nodes]
    out["nodes_used"] = len(per_node)
    out["pods_per_node_max"] = max(per_node, default=0)
    return out
