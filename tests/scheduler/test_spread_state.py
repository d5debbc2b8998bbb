"""PodTopologySpread's PreFilter state (kube-scheduler's ``TestPreFilterState``,
``TestPreFilterStateAddPod`` and ``RemovePod``): the domains of each hard constraint and
the matching pods in each, and how the PreFilter extensions move them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.affinity_support import (
    UNSCHEDULABLE_TAINT,
    exists,
    handle,
    node_obj,
    pod,
    run_filter,
    snapshot_of,
    spread,
)
from vgpu_scheduler.framework.nodeinfo import NodePod
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube.pod_topology_spread import FILTER_KEY, PodTopologySpread
from vgpu_scheduler.plugins.kube.pod_topology_spread.filtering import FilterState

FOO, BAR = exists("foo"), exists("bar")
F, B, FB = {"foo": ""}, {"bar": ""}, {"foo": "", "bar": ""}


def zn(name: str, zone: str | None = None, **extra: str) -> Any:
    return node_obj(name, {"node": name, **({"zone": zone} if zone else {}), **extra})


FOUR = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"),
        zn("node-y", "zone2")]
ABY = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")]
ABC = [zn("node-a", foo=""), zn("node-b", foo=""), zn("node-c", bar="")]
ABC_TAINTED = [zn("node-a"), zn("node-b"),
               node_obj("node-c", {"node": "node-c", "bar": ""}, [UNSCHEDULABLE_TAINT])]
_seq = iter(range(10**6))


def on(node: str, labels: dict[str, str] | None, count: int = 1, ns: str = "default") -> list[Any]:
    return [pod(f"e{next(_seq)}", labels, node=node, namespace=ns) for _ in range(count)]


def domains(state: FilterState) -> list[dict[str, int]]:
    return [{v: int(h.counts[c]) for v, c in h.code_of.items()
             if c < len(h.domains) and h.domains[c]} for h in state.hard]


P_2_1_0_2 = [*on("node-a", F, 2), *on("node-b", F), *on("node-y", F, 2)]
P_2_1_0_4 = [*on("node-a", F, 2), *on("node-b", F), *on("node-y", F, 4)]
BAR_121 = [*on("node-a", B), *on("node-b", B, 2), *on("node-c", {})]
AFF_FOO = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In",
                                                 "values": [""]}]}]}}}

CASES: list[tuple[str, Any, list[Any], list[Any], list[dict[str, int]]]] = [
    ("a clean cluster", pod("p", F, constraints=[spread(5, "zone", {"matchLabels": {
        "foo": "bar"}})]), [], FOUR, [{"zone1": 0, "zone2": 0}]),
    ("one constraint", pod("p", F, constraints=[spread(1, "zone", FOO)]), P_2_1_0_2, FOUR,
     [{"zone1": 3, "zone2": 2}]),
    ("a null selector counts nothing", pod("p", F, constraints=[spread(1, "zone", None)]),
     P_2_1_0_2, FOUR, [{"zone1": 0, "zone2": 0}]),
    ("three zones", pod("p", F, constraints=[spread(1, "zone", FOO)]), P_2_1_0_2,
     [*FOUR, zn("node-o", "zone3"), zn("node-p", "zone3")],
     [{"zone1": 3, "zone2": 2, "zone3": 0}]),
    ("other namespaces do not count", pod("p", F, constraints=[spread(1, "zone", FOO)]),
     [*on("node-a", F), *on("node-a", F, ns="ns1"), *on("node-b", F),
      *on("node-y", F, ns="ns2"), *on("node-y", F)], FOUR, [{"zone1": 2, "zone2": 1}]),
    ("two constraints", pod("p", F, constraints=[spread(1, "zone", FOO),
                                                 spread(1, "node", FOO)]), P_2_1_0_4, FOUR,
     [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}]),
    ("soft constraints are not filtered on",
     pod("p", F, constraints=[spread(1, "zone", FOO, hard=False), spread(1, "zone", FOO),
                              spread(1, "node", FOO, hard=False), spread(1, "node", FOO)]),
     P_2_1_0_4, ABY, [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}]),
    ("different selectors", pod("p", FB, constraints=[spread(1, "zone", FOO),
                                                      spread(1, "node", BAR)]),
     [*on("node-a", F), *on("node-b", B)], ABY,
     [{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}]),
    ("node affinity leaves node-x out",
     pod("p", F, constraints=[spread(1, "zone", FOO), spread(1, "node", FOO)],
         affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
             "nodeSelectorTerms": [{"matchExpressions": [{"key": "node", "operator": "NotIn",
                                                          "values": ["node-x"]}]}]}}}),
     P_2_1_0_4, FOUR, [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}]),
    ("nodeAffinityPolicy Honor: the nodeSelector", pod("p", F, nodeSelector=F, constraints=[
        spread(1, "node", BAR)]), BAR_121, ABC, [{"node-a": 1, "node-b": 2}]),
    ("nodeAffinityPolicy Ignore: the nodeSelector", pod("p", F, nodeSelector=F, constraints=[
        spread(1, "node", BAR, nodeAffinityPolicy="Ignore")]), BAR_121, ABC,
     [{"node-a": 1, "node-b": 2, "node-c": 0}]),
    ("nodeAffinityPolicy Honor: node affinity", pod("p", F, affinity=AFF_FOO, constraints=[
        spread(1, "node", BAR)]), BAR_121, ABC, [{"node-a": 1, "node-b": 2}]),
    ("nodeAffinityPolicy Ignore: node affinity", pod("p", F, affinity=AFF_FOO, constraints=[
        spread(1, "node", BAR, nodeAffinityPolicy="Ignore")]), BAR_121, ABC,
     [{"node-a": 1, "node-b": 2, "node-c": 0}]),
    ("nodeTaintsPolicy Ignore", pod("p", F, constraints=[spread(1, "node", BAR)]), BAR_121,
     ABC_TAINTED, [{"node-a": 1, "node-b": 2, "node-c": 0}]),
    ("nodeTaintsPolicy Honor", pod("p", F, constraints=[
        spread(1, "node", BAR, nodeTaintsPolicy="Honor")]), BAR_121, ABC_TAINTED,
     [{"node-a": 1, "node-b": 2}]),
    ("nodeTaintsPolicy Honor, the taint tolerated", pod("p", F, constraints=[
        spread(1, "node", BAR, nodeTaintsPolicy="Honor")], tolerations=[{
            "key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
     BAR_121, ABC_TAINTED, [{"node-a": 1, "node-b": 2, "node-c": 0}]),
    ("matchLabelKeys ANDed with the selector",
     pod("p", {"foo": "", "bar": "a"}, constraints=[spread(1, "zone", FOO,
                                                           matchLabelKeys=["bar"])]),
     [*on("node-a", F), *on("node-a", {"foo": "", "bar": "a"}), *on("node-b", F),
      *on("node-y", {"foo": "", "bar": "a"}), *on("node-y", B)], FOUR,
     [{"zone1": 1, "zone2": 1}]),
    ("matchLabelKeys with an empty selector",
     pod("p", {"foo": "a"}, constraints=[spread(1, "zone", {}, matchLabelKeys=["foo"])]),
     [*on("node-a", {"foo": "a"}, 2), *on("node-b", {"foo": "a"}),
      *on("node-y", {"foo": "a"}, 2)], FOUR, [{"zone1": 3, "zone2": 2}]),
    ("an empty selector counts every pod of the namespace, a null one none",
     pod("p", F, constraints=[spread(1, "zone", {}), spread(1, "node", None)]),
     [*on("node-a", F), *on("node-a", B), *on("node-y", {}), *on("node-y", F, ns="other")],
     FOUR, [{"zone1": 2, "zone2": 1}, {"node-a": 0, "node-b": 0, "node-x": 0, "node-y": 0}]),
    ("matchLabelKeys cannot widen a null selector",
     pod("p", F, constraints=[spread(1, "zone", None, matchLabelKeys=["bar"])]),
     [*on("node-a", {"foo": "a"}, 2), *on("node-y", {"foo": "a"}, 2)], FOUR,
     [{"zone1": 0, "zone2": 0}]),
    ("a matchLabelKeys key the pod lacks is ignored",
     pod("p", F, constraints=[spread(1, "zone", FOO, matchLabelKeys=["bar"])]),
     [*on("node-a", {"foo": "a"}, 2), *on("node-b", {"foo": "a"}),
      *on("node-y", {"foo": "a"}, 2)], FOUR, [{"zone1": 3, "zone2": 2}]),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_domains_and_counts(incoming: Any, pods: list[Any], nodes: list[Any],
                            want: list[dict[str, int]]) -> None:
    plugin = PodTopologySpread(handle())
    status, _, state = run_filter(plugin, incoming, snapshot_of(plugin, nodes, pods))
    assert status.ok
    assert domains(state.read(FILTER_KEY)) == want


def test_no_hard_constraint_skips() -> None:
    plugin = PodTopologySpread(handle())
    status, _, _ = run_filter(plugin, pod("p", F), snapshot_of(plugin, FOUR))
    assert status.code is Code.SKIP


NODE_AB = [zn("node-a", "zone1"), zn("node-b", "zone1")]
NODE_AX = [zn("node-a", "zone1"), zn("node-x", "zone2")]
ON_NODE = [spread(1, "node", FOO)]
ZONE_NODE = [spread(1, "zone", FOO), spread(1, "node", FOO)]
AFFINITY_NOT_BAR = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "NotIn",
                                                 "values": ["bar"]}]}]}}}
A_BAR_B = [zn("node-a", "zone1", foo="bar"), zn("node-b", "zone2", foo="")]


@pytest.mark.parametrize(("constraints", "spec", "existing", "nodes", "added", "after"), [
    (ON_NODE, {}, [], NODE_AB, ("node-a", F, "default"), [{"node-a": 1, "node-b": 0}]),
    (ON_NODE, {}, [("node-b", F)], NODE_AB, ("node-a", F, "default"),
     [{"node-a": 1, "node-b": 1}]),
    (ON_NODE, {}, [("node-b", F)], NODE_AB, ("node-a", F, "ns1"), [{"node-a": 0, "node-b": 1}]),
    (ON_NODE, {}, [("node-b", F)], NODE_AB, ("node-b", F, "default"),
     [{"node-a": 0, "node-b": 2}]),
    (ZONE_NODE, {}, [], NODE_AX, ("node-a", F, "default"),
     [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}]),
    ([spread(1, "zone", FOO)], {"affinity": AFFINITY_NOT_BAR},
     [("node-a", F), ("node-b", F)], A_BAR_B, ("node-a", F, "default"), [{"zone2": 1}]),
    ([spread(1, "zone", FOO)], {}, [("node-a", F), ("node-b", F)], A_BAR_B,
     ("node-b", B, "default"), [{"zone1": 1, "zone2": 1}]),
])
def test_adding_and_removing_pods(constraints: Any, spec: Any, existing: Any, nodes: Any, *,
                                  added: Any, after: Any) -> None:
    plugin = PodTopologySpread(handle())
    incoming = pod("p", F, constraints=constraints, **spec)
    snap = snapshot_of(plugin, nodes, [pod(f"e{i}", lab, node=n) for i, (n, lab)
                                       in enumerate(existing)])
    _, _, state = run_filter(plugin, incoming, snap)
    before = state.read(FILTER_KEY)
    node_name, labels, ns = added
    other = NodePod(pod("added", labels, node=node_name, namespace=ns))
    node = snap.get(node_name)
    assert node is not None
    assert plugin.add_pod(state, incoming, other, node).ok
    assert domains(state.read(FILTER_KEY)) == after
    assert plugin.remove_pod(state, incoming, other, node).ok
    assert domains(state.read(FILTER_KEY)) == domains(before)
    assert [h.minimum for h in state.read(FILTER_KEY).hard] == [h.minimum for h in before.hard]
