"""PodTopologySpread's scoring, case by case as kube-scheduler's ``scoring_test.go``
(``TestPodTopologySpreadScore``): normalized scores of the feasible nodes. As there, the
plugin runs with the system default constraints (which a pod with its own ignores)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.affinity_support import (
    UNSCHEDULABLE_TAINT,
    exists,
    handle,
    node_obj,
    pod,
    run_score,
    snapshot_of,
    spread,
)
from vgpu_scheduler.framework.status import Code, Status
from vgpu_scheduler.plugins.kube.pod_topology_spread import PodTopologySpread

HOST = "kubernetes.io/hostname"
FOO, BAR = exists("foo"), exists("bar")
F, B, FB = {"foo": ""}, {"bar": ""}, {"foo": "", "bar": ""}
_seq = iter(range(10**6))


def hn(name: str, **labels: str) -> Any:
    return node_obj(name, {HOST: name, **labels})


def on(node: str, labels: dict[str, str] | None, count: int = 1, ns: str = "default",
       terminating: bool = False) -> list[Any]:
    return [pod(f"e{next(_seq)}", labels, node=node, namespace=ns, terminating=terminating)
            for _ in range(count)]


def soft(*constraints: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any) -> Any:
    return pod("p", F if labels is None else labels,
               constraints=[{**c, "whenUnsatisfiable": "ScheduleAnyway"} for c in constraints],
               **spec)


ABCD = [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")]
P_2103 = [*on("node-a", F, 2), *on("node-b", F), *on("node-d", F, 3)]
P_4321 = [*on("node-a", F, 4), *on("node-b", F, 3), *on("node-c", F, 2), *on("node-d", F)]
P_4213 = [*on("node-a", F, 4), *on("node-b", F, 2), *on("node-x", F), *on("node-y", F, 3)]
ZONED = [hn("node-a", zone="zone1"), hn("node-b", zone="zone1"), hn("node-x", zone="zone2"),
         hn("node-y", zone="zone2")]
MIXED = [*on("node-a", F), *on("node-b", FB), *on("node-y", F), *on("node-y", B)]
POLICY_NODES = [node_obj("node-a", {"node": "node-a", "foo": ""}),
                node_obj("node-b", {"node": "node-b", "foo": ""}),
                node_obj("node-c", {"node": "node-c"})]
TAINT_NODES = [node_obj("node-a", {"node": "node-a"}), node_obj("node-b", {"node": "node-b"}),
               node_obj("node-c", {"node": "node-c"}, [UNSCHEDULABLE_TAINT])]
POLICY_PODS = [*on("node-a", F, 2), *on("node-b", F), *on("node-c", F)]
AFF_FOO = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In",
                                                 "values": [""]}]}]}}}
KEYS_NODES = [hn("node-a", zone="zone1"), hn("node-b", zone="zone1"),
              hn("node-c", zone="zone2"), hn("node-d", zone="zone2")]

# (name, pod, existing pods, every node, the feasible ones (None: all), scores)
CASES: list[tuple[str, Any, list[Any], list[Any], Any, list[int]]] = [
    ("no existing pods", soft(spread(1, HOST, FOO)), [], ABCD[:2], None, [100, 100]),
    ("one candidate scores 100", soft(spread(1, HOST, FOO)),
     [*on("node-a", F, 2), *on("node-b", F)], ABCD[:2], ["node-a"], [100]),
    ("the same number of pods everywhere", soft(spread(1, HOST, FOO)),
     [*on("node-a", F), *on("node-b", F)], ABCD[:2], None, [100, 100]),
    ("2/1/0/3 over four candidates", soft(spread(1, HOST, FOO)), P_2103, ABCD, None,
     [20, 60, 100, 0]),
    ("a null selector", soft(spread(1, HOST, None)), P_2103, ABCD, None, [100, 100, 100, 100]),
    ("an empty selector counts every pod", soft(spread(1, HOST, {})),
     [*on("node-a", F), *on("node-a", B), *on("node-b", {}), *on("node-d", F, 3)], ABCD, None,
     [20, 60, 100, 0]),
    ("an empty selector counts every pod of a zone", soft(spread(1, "zone", {})),
     [*on("node-a", B, 3), *on("node-x", {})], ZONED, None, [25, 25, 100, 100]),
    ("2/1/0/3 with maxSkew 2", soft(spread(2, HOST, FOO)), P_2103, ABCD, None,
     [33, 66, 100, 16]),
    ("4/3/2/1 with maxSkew 3", soft(spread(3, HOST, FOO)), P_4321, ABCD, None,
     [44, 66, 77, 100]),
    ("4/2/1/~3~: three candidates", soft(spread(1, HOST, FOO)), P_4213,
     [hn("node-a"), hn("node-b"), hn("node-x"), hn("node-y")], ["node-a", "node-b", "node-x"],
     [33, 83, 100]),
    ("a candidate without the key scores 0", soft(spread(1, HOST, FOO)), P_4213,
     [hn("node-a"), node_obj("node-b", {"n": "node-b"}), hn("node-x"), hn("node-y")],
     ["node-a", "node-b", "node-x"], [16, 0, 100]),
    ("zones, three candidates", soft(spread(1, "zone", FOO)), P_4213, ZONED,
     ["node-a", "node-b", "node-x"], [75, 75, 100]),
    ("zone and host, two candidates",
     soft(spread(1, "zone", FOO), spread(1, HOST, FOO)),
     [*on("node-a", F, 2), *on("node-b", F), *on("node-x", F, 2), *on("node-y", F, 4)],
     ZONED, ["node-a", "node-x"], [100, 63]),
    ("zone and host with different selectors",
     soft(spread(1, "zone", FOO), spread(1, HOST, BAR), labels=FB), MIXED, ZONED, None,
     [60, 20, 100, 60]),
    ("different selectors, some nodes without pods",
     soft(spread(1, "zone", FOO), spread(1, HOST, BAR), labels=FB),
     [*on("node-b", B), *on("node-x", F), *on("node-y", FB)], ZONED, None, [100, 60, 40, 0]),
    ("different selectors, three candidates",
     soft(spread(1, "zone", FOO), spread(1, HOST, BAR), labels=FB), MIXED, ZONED,
     ["node-a", "node-b", "node-x"], [50, 25, 100]),
    ("other namespaces do not count", soft(spread(1, HOST, FOO)),
     [*on("node-a", F, ns="ns1"), *on("node-a", F), *on("node-b", F, 2)], ABCD[:2], None,
     [100, 33]),
    ("terminating pods do not count", soft(spread(1, HOST, FOO)),
     [*on("node-a", F, terminating=True), *on("node-b", F)], ABCD[:2], None, [100, 0]),
    ("minDomains does not matter for scoring", soft(spread(2, "node", FOO, minDomains=10)),
     [*on("node-a", F, 2), *on("node-b", F, 2), *on("node-c", F)],
     [node_obj(n, {"node": n}) for n in ("node-a", "node-b", "node-c")], None, [75, 75, 100]),
    ("nodeAffinityPolicy Honor, nodeSelector", soft(spread(1, "node", FOO), nodeSelector=F),
     POLICY_PODS, POLICY_NODES, None, [0, 33, 100]),
    ("nodeAffinityPolicy Ignore, nodeSelector",
     soft(spread(1, "node", FOO, nodeAffinityPolicy="Ignore"), nodeSelector=F),
     POLICY_PODS, POLICY_NODES, None, [66, 100, 100]),
    ("nodeAffinityPolicy Honor, node affinity", soft(spread(1, "node", FOO), affinity=AFF_FOO),
     POLICY_PODS, POLICY_NODES, None, [0, 33, 100]),
    ("nodeAffinityPolicy Ignore, node affinity",
     soft(spread(1, "node", FOO, nodeAffinityPolicy="Ignore"), affinity=AFF_FOO),
     POLICY_PODS, POLICY_NODES, None, [66, 100, 100]),
    ("nodeTaintsPolicy Honor", soft(spread(1, "node", FOO, nodeTaintsPolicy="Honor")),
     POLICY_PODS, TAINT_NODES, None, [0, 33, 100]),
    ("nodeTaintsPolicy Ignore", soft(spread(1, "node", FOO)), POLICY_PODS, TAINT_NODES, None,
     [66, 100, 100]),
    ("matchLabelKeys with empty selectors",
     soft(spread(1, "zone", {}, matchLabelKeys=["foo"]),
          spread(1, HOST, {}, matchLabelKeys=["bar"]), labels=FB),
     [*on("node-a", F), *on("node-b", FB), *on("node-c", F), *on("node-c", B)], KEYS_NODES,
     None, [60, 20, 60, 100]),
    ("matchLabelKeys ANDed with a selector",
     soft(spread(1, "zone", FOO), spread(1, HOST, BAR, matchLabelKeys=["baz"]),
          labels={"foo": "", "bar": "", "baz": ""}),
     [*on("node-a", F), *on("node-b", {"foo": "", "bar": "", "baz": ""}), *on("node-c", F),
      *on("node-c", B), *on("node-c", {"bar": "", "baz": ""})], KEYS_NODES, None,
     [60, 20, 60, 100]),
]


def scores(plugin: PodTopologySpread, incoming: Any, pods: list[Any], nodes: list[Any],
           feasible: list[str] | None) -> Any:
    got = run_score(plugin, incoming, snapshot_of(plugin, nodes, pods), feasible)
    if isinstance(got, Status):
        return got.code
    names = feasible or [n["metadata"]["name"] for n in nodes]
    return [got[name] for name in names]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "feasible", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_score(incoming: Any, pods: list[Any], nodes: list[Any], feasible: Any,
               want: list[int]) -> None:
    assert scores(PodTopologySpread(handle()), incoming, pods, nodes, feasible) == want


def test_system_defaults_spread_by_host_where_nodes_have_no_zone() -> None:
    service = {"metadata": {"name": "s", "namespace": "default"},
               "spec": {"selector": {"foo": ""}}}
    plugin = PodTopologySpread(handle(services=[service]))
    assert scores(plugin, pod("p", F), P_4321, ABCD, None) == [44, 66, 77, 100]


def test_no_soft_constraint_skips_scoring() -> None:
    plugin = PodTopologySpread(handle())
    hard_only = pod("p", F, constraints=[spread(1, HOST, FOO)])
    assert scores(plugin, hard_only, [], ABCD, None) is Code.SKIP
    assert scores(plugin, pod("p", F), [], ABCD, None) is Code.SKIP
