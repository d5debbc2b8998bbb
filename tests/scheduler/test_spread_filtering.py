"""PodTopologySpread's Filter, case by case as kube-scheduler's ``filtering_test.go``
(``TestSingleConstraint``, ``TestMultipleConstraints``): each node's answer.

``ok`` fits, ``skew`` is "didn't match pod topology spread constraints" (Unschedulable),
``label`` the missing-label variant (UnschedulableAndUnresolvable).
"""

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
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube.pod_topology_spread import PodTopologySpread
from vgpu_scheduler.plugins.kube.pod_topology_spread.filtering import MISSING_LABEL, NOT_MATCH

FOO, BAR = exists("foo"), exists("bar")
HAS_FOO = {"foo": ""}


def zn(name: str, zone: str | None, **extra: str) -> Any:
    labels = {"node": name, **extra}
    if zone is not None:
        labels["zone"] = zone
    return node_obj(name, labels)


FOUR = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"),
        zn("node-y", "zone2")]


def on(node: str, labels: dict[str, str] | None = None, count: int = 1, ns: str = "default",
       terminating: bool = False) -> list[Any]:
    return [pod(f"{node}-{ns}-{i}-{sorted(labels or {})}", labels, node=node, namespace=ns,
                terminating=terminating) for i in range(count)]


def incoming(labels: dict[str, str], *constraints: dict[str, Any], **spec: Any) -> Any:
    return pod("p", labels, constraints=constraints, **spec)


SPREAD_2103 = [*on("node-a", HAS_FOO, 2), *on("node-b", HAS_FOO), *on("node-y", HAS_FOO, 3)]
HONOR, IGNORE = {"nodeAffinityPolicy": "Honor"}, {"nodeAffinityPolicy": "Ignore"}
FOO_NODES = [zn("node-a", None, foo=""), zn("node-b", None, foo=""), zn("node-x", None, foo=""),
             zn("node-y", None)]
ONE_EACH = [*on("node-a", HAS_FOO), *on("node-b", HAS_FOO), *on("node-y", HAS_FOO)]

SINGLE: list[tuple[str, Any, list[Any], list[Any], str]] = [
    ("no existing pods", incoming(HAS_FOO, spread(1, "zone", FOO)), [], FOUR, "ok ok ok ok"),
    ("no existing pods, the pod does not match itself",
     incoming(HAS_FOO, spread(1, "zone", BAR)), [], FOUR, "ok ok ok ok"),
    ("pods of other namespaces do not count", incoming(HAS_FOO, spread(1, "zone", FOO)),
     [*on("node-a", HAS_FOO, ns="ns1"), *on("node-a", HAS_FOO, ns="ns2"),
      *on("node-x", HAS_FOO), *on("node-y", HAS_FOO)], FOUR, "ok ok skew skew"),
    ("a null selector matches no existing pod", incoming(HAS_FOO, spread(1, "zone", None)),
     [*on("node-x", HAS_FOO), *on("node-y", HAS_FOO)], FOUR, "ok ok ok ok"),
    # LabelSelectorAsSelector: {} selects every pod of the namespace (kube-scheduler 1.27
    # up to kubernetes#141340 counted none; v1.20 and current count them all).
    ("an empty selector matches every pod of the namespace",
     incoming({"bar": ""}, spread(1, "zone", {})),
     [*on("node-x", HAS_FOO), *on("node-y", {}), *on("node-a", HAS_FOO, ns="ns1")], FOUR,
     "ok ok skew skew"),
    ("3/3 across zones: every node fits", incoming(HAS_FOO, spread(1, "zone", FOO)),
     SPREAD_2103, FOUR, "ok ok ok ok"),
    ("a node without the zone label is no domain",
     incoming(HAS_FOO, spread(1, "zone", FOO)),
     [*on("node-a", HAS_FOO), *on("node-b", HAS_FOO), *on("node-x", HAS_FOO),
      *on("node-y", HAS_FOO)],
     [zn("node-a", "zone1"), node_obj("node-b", {"zon": "zone1", "node": "node-b"}),
      zn("node-x", "zone2"), zn("node-y", "zone2")], "ok label skew skew"),
    ("no node has the key", incoming(HAS_FOO, spread(1, "rack", FOO)), [],
     [zn("node-a", "zone1"), zn("node-x", "zone2")], "label label"),
    ("2/1/0/3 across nodes: only the empty one fits", incoming(HAS_FOO, spread(1, "node", FOO)),
     SPREAD_2103, FOUR, "skew skew ok skew"),
    ("2/1/0/3 with maxSkew 2", incoming(HAS_FOO, spread(2, "node", FOO)), SPREAD_2103, FOUR,
     "skew ok ok skew"),
    ("2/1/0/3, the pod does not match itself", incoming({"bar": ""}, spread(1, "node", FOO)),
     SPREAD_2103, FOUR, "skew ok ok skew"),
    ("only the nodes of the pod's node affinity are domains (2/~1~/~0~/3)",
     incoming(HAS_FOO, spread(1, "node", FOO), affinity={"nodeAffinity": {
         "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
             "matchExpressions": [{"key": "node", "operator": "In",
                                   "values": ["node-a", "node-y"]}]}]}}}),
     SPREAD_2103, FOUR, "ok ok ok skew"),
    ("terminating pods do not count", incoming(HAS_FOO, spread(1, "node", FOO)),
     [*on("node-a", HAS_FOO, terminating=True), *on("node-b", HAS_FOO)],
     [zn("node-a", None), zn("node-b", None)], "ok skew"),
    ("node affinity leaves node-b's pods out (0/~2~/0/1)",
     incoming(HAS_FOO, spread(1, "zone", FOO), affinity={"nodeAffinity": {
         "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
             "matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-b"]}]}]}}}),
     [*on("node-b", HAS_FOO, 2), *on("node-y", HAS_FOO)], FOUR, "ok ok skew skew"),
    ("fewer domains than minDomains: the minimum is 0",
     incoming(HAS_FOO, spread(2, "node", FOO, minDomains=4)),
     [*on("node-a", HAS_FOO, 2), *on("node-b", HAS_FOO, 2), *on("node-c", HAS_FOO)],
     [zn("node-a", None), zn("node-b", None), zn("node-c", None)], "skew skew ok"),
    ("more domains than minDomains: the real minimum",
     incoming(HAS_FOO, spread(2, "node", FOO, minDomains=2)),
     [*on("node-a", HAS_FOO, 2), *on("node-b", HAS_FOO, 2), *on("node-c", HAS_FOO)],
     [zn("node-a", None), zn("node-b", None), zn("node-c", None)], "ok ok ok"),
    ("fewer zones than minDomains",
     incoming(HAS_FOO, spread(2, "zone", FOO, minDomains=3)),
     [*on("node-a", HAS_FOO), *on("node-b", HAS_FOO), *on("node-y", HAS_FOO)], FOUR,
     "skew skew ok ok"),
    ("more zones than minDomains", incoming(HAS_FOO, spread(2, "zone", FOO, minDomains=1)),
     [*on("node-a", HAS_FOO), *on("node-b", HAS_FOO), *on("node-y", HAS_FOO)], FOUR,
     "ok ok ok ok"),
    ("nodeAffinityPolicy Honor with a nodeSelector (1/1/0/~1~)",
     incoming(HAS_FOO, spread(1, "node", FOO), nodeSelector={"foo": ""}), ONE_EACH, FOO_NODES,
     "skew skew ok ok"),
    ("nodeAffinityPolicy Ignore with a nodeSelector (1/1/0/1)",
     incoming(HAS_FOO, spread(1, "node", FOO, **IGNORE), nodeSelector={"foo": ""}), ONE_EACH,
     FOO_NODES, "skew skew ok skew"),
    ("nodeAffinityPolicy Honor with node affinity",
     incoming(HAS_FOO, spread(1, "node", FOO, **HONOR), affinity={"nodeAffinity": {
         "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
             "matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}]}}}),
     ONE_EACH, FOO_NODES, "skew skew ok ok"),
    ("nodeTaintsPolicy Honor leaves the tainted node out (1/1/0/~1~)",
     incoming(HAS_FOO, spread(1, "node", FOO, nodeTaintsPolicy="Honor")), ONE_EACH,
     [*FOO_NODES[:3], node_obj("node-y", {"node": "node-y"}, [UNSCHEDULABLE_TAINT])],
     "skew skew ok ok"),
    ("nodeTaintsPolicy Ignore counts it (1/1/0/1)",
     incoming(HAS_FOO, spread(1, "node", FOO)), ONE_EACH,
     [*FOO_NODES[:3], node_obj("node-y", {"node": "node-y"}, [UNSCHEDULABLE_TAINT])],
     "skew skew ok skew"),
]

MULTIPLE: list[tuple[str, Any, list[Any], list[Any], str]] = [
    ("zone and node, spreads 3/3 and 2/1/0/3: node-x",
     incoming(HAS_FOO, spread(1, "zone", FOO), spread(1, "node", FOO)), SPREAD_2103, FOUR,
     "skew skew ok skew"),
    ("zone and node, spreads 3/4 and 2/1/0/4: nothing",
     incoming(HAS_FOO, spread(1, "zone", FOO), spread(1, "node", FOO)),
     [*SPREAD_2103, pod("y4", HAS_FOO, node="node-y")], FOUR, "skew skew skew skew"),
    ("different selectors, spreads 1/0 and 1/0/0/1: node-x",
     incoming({"foo": "", "bar": ""}, spread(1, "zone", FOO), spread(1, "node", BAR)),
     [*on("node-a", HAS_FOO), *on("node-y", {"bar": ""})], FOUR, "skew skew ok skew"),
    ("different selectors, spreads 1/0 and 0/0/1/1: nothing",
     incoming({"foo": "", "bar": ""}, spread(1, "zone", FOO), spread(1, "node", BAR)),
     [*on("node-a", HAS_FOO), *on("node-x", {"bar": ""}), *on("node-y", {"bar": ""})], FOUR,
     "skew skew skew skew"),
    ("different selectors, spreads 2/3 and 1/0/0/1: node-b",
     incoming({"foo": "", "bar": ""}, spread(1, "zone", FOO), spread(1, "node", BAR)),
     [*on("node-a", HAS_FOO), *on("node-a", {"foo": "", "bar": ""}), *on("node-y", HAS_FOO),
      *on("node-y", {"foo": "", "bar": ""}), pod("y3", HAS_FOO, node="node-y")], FOUR,
     "skew ok skew skew"),
    ("the pod does not match itself on zone",
     incoming({"bar": ""}, spread(1, "zone", FOO), spread(1, "node", BAR)),
     [*on("node-a", HAS_FOO), *on("node-x", {"bar": ""}), *on("node-y", {"bar": ""})], FOUR,
     "ok ok skew skew"),
    ("node-x lacks the node label",
     incoming(HAS_FOO, spread(1, "zone", FOO), spread(1, "node", FOO)),
     [*on("node-a", HAS_FOO), *on("node-y", HAS_FOO)],
     [*FOUR[:2], node_obj("node-x", {"zone": "zone2"}), FOUR[3]], "skew ok label skew"),
    ("zone honors node affinity, node ignores it",
     incoming(HAS_FOO, spread(1, "zone", FOO), spread(1, "node", FOO, **IGNORE),
              nodeSelector={"foo": ""}),
     [*on("node-a", HAS_FOO), *on("node-b", HAS_FOO), *on("node-y", HAS_FOO)],
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1", foo=""),
      zn("node-x", "zone2", foo=""), zn("node-y", "zone2")], "skew skew ok skew"),
    ("zone honors taints, node ignores them",
     incoming(HAS_FOO, spread(1, "zone", FOO, nodeTaintsPolicy="Honor"),
              spread(1, "node", FOO)),
     [*on("node-a", HAS_FOO), *on("node-b", HAS_FOO), *on("node-y", HAS_FOO)],
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1", foo=""),
      zn("node-x", "zone2", foo=""),
      node_obj("node-y", {"zone": "zone2", "node": "node-y"}, [UNSCHEDULABLE_TAINT])],
     "skew skew ok skew"),
]

ANSWERS = {"ok": (Code.SUCCESS, ()), "skew": (Code.UNSCHEDULABLE, (NOT_MATCH,)),
           "label": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (MISSING_LABEL,))}


@pytest.mark.parametrize(("pod_in", "pods", "nodes", "want"),
                         [c[1:] for c in SINGLE + MULTIPLE],
                         ids=[c[0] for c in SINGLE + MULTIPLE])
def test_filter(pod_in: Any, pods: list[Any], nodes: list[Any], want: str) -> None:
    plugin = PodTopologySpread(handle())
    status, answers, _ = run_filter(plugin, pod_in, snapshot_of(plugin, nodes, pods))
    assert status.ok
    got = [(answers[n["metadata"]["name"]].code, answers[n["metadata"]["name"]].reasons)
           for n in nodes]
    assert got == [ANSWERS[w] for w in want.split()]
