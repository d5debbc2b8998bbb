"""InterPodAffinity across several nodes and topology domains (kube-scheduler's
``TestRequiredAffinityMultipleNodes``), and its PreFilter state: the counts, the
PreFilter extensions preemption uses, and what wakes a rejected pod."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.affinity_support import (
    affinity,
    exists,
    handle,
    label_in,
    node_obj,
    pod,
    pod_obj,
    run_filter,
    snapshot_of,
    term,
)
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.nodeinfo import NodePod
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube.interpod_affinity import FILTER_KEY, InterPodAffinity
from vgpu_scheduler.plugins.kube.interpod_affinity.filtering import (
    AFFINITY,
    ANTI_AFFINITY,
    EXISTING_ANTI_AFFINITY,
)

CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {
    "region": "India"}


def zoned(name: str, region: str, zone: str) -> dict[str, Any]:
    return node_obj(name, {"region": region, "zone": zone, "hostname": name})


def on(node: str, labels: dict[str, str] | None = None, *, name: str = "",
       ns: str = "default", a: dict[str, Any] | None = None) -> Any:
    return pod(name or f"on-{node}-{len(labels or {})}-{ns}", labels, node=node, namespace=ns,
               aff=a)


def req(*terms: Any) -> dict[str, Any]:
    return affinity(required=terms)


def anti(*terms: Any) -> dict[str, Any]:
    return affinity(anti=terms)


# (name, incoming, existing pods, nodes, per node: reason or None; "skip" for PreFilter)
CASES: list[tuple[str, Any, list[Any], list[Any], Any]] = [
    ("every node of the matching pod's region fits",
     pod("in", aff=req(term(label_in("foo", "bar"), "region"))),
     [on("node1", {"foo": "bar"})],
     [node_obj("node1", CHINA), node_obj("node2", CHINA_AZ1), node_obj("node3", INDIA)],
     [None, None, AFFINITY]),
    ("the first pod of a group with affinity to itself goes anywhere",
     pod("in", {"foo": "bar", "service": "securityscan"},
         aff=req(term(label_in("foo", "bar"), "zone"),
                 term(label_in("service", "securityscan"), "zone"))),
     [on("nodeA", {"foo": "bar"})],
     [node_obj("nodeA", {"zone": "az1", "hostname": "h1"}),
      node_obj("nodeB", {"zone": "az2", "hostname": "h2"})],
     [None, None]),
    ("... but only onto nodes that have the topology keys",
     pod("in", {"foo": "bar", "service": "securityscan"},
         aff=req(term(label_in("foo", "bar"), "zone"),
                 term(label_in("service", "securityscan"), "zone"))),
     [on("nodeA", {"foo": "bar"})],
     [node_obj("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
      node_obj("nodeB", {"zoneLabel": "az2", "hostname": "h2"})],
     [AFFINITY, AFFINITY]),
    ("anti-affinity keeps the pod out of the whole region",
     pod("in", aff=anti(term(label_in("foo", "abc"), "region"))),
     [on("nodeA", {"foo": "abc"})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")],
     [ANTI_AFFINITY, ANTI_AFFINITY]),
    ("any one anti-affinity term selecting the pod is enough",
     pod("in", aff=anti(term(label_in("foo", "abc"), "region"),
                        term(label_in("service", "securityscan"), "zone"))),
     [on("nodeA", {"foo": "abc", "service": "securityscan"})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")],
     [ANTI_AFFINITY, ANTI_AFFINITY]),
    ("anti-affinity by region leaves the other region free",
     pod("in", aff=anti(term(label_in("foo", "abc"), "region"))),
     [on("nodeA", {"foo": "abc"})],
     [node_obj("nodeA", CHINA), node_obj("nodeB", CHINA_AZ1), node_obj("nodeC", INDIA)],
     [ANTI_AFFINITY, ANTI_AFFINITY, None]),
    ("an existing pod's anti-affinity applies only to pods of its own namespace",
     pod("in", {"foo": "123"}, namespace="NS1", aff=anti(term(label_in("foo", "bar"), "region"))),
     [on("nodeA", {"foo": "bar"}, ns="NS1"),
      on("nodeC", ns="NS2", a=anti(term(label_in("foo", "123"), "region")))],
     [node_obj("nodeA", CHINA), node_obj("nodeB", CHINA_AZ1), node_obj("nodeC", INDIA)],
     [ANTI_AFFINITY, ANTI_AFFINITY, None]),
    ("an existing pod's term on a key no node has constrains nothing",
     pod("in", {"foo": ""}),
     [on("nodeA", a=anti(term(exists("foo"), "invalid-node-label")))],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z1")], "skip"),
    ("the incoming pod's term needs the key on the node as well as a matching pod",
     pod("in", aff=anti(term(exists("foo"), "invalid-node-label"))),
     [on("nodeA", {"foo": ""})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z1")], [None, None]),
    ("existing pods' terms: each one that selects the pod closes its domain",
     pod("in", {"foo": "", "bar": ""}),
     [on("nodeA", name="a1", a=anti(term(exists("foo"), "zone"))),
      on("nodeA", name="a2", a=anti(term(exists("bar"), "region")))],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")],
     [EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY]),
    ("incoming terms: each existing pod one selects closes its domain",
     pod("in", aff=anti(term(exists("foo"), "zone"), term(exists("bar"), "region"))),
     [on("nodeA", {"foo": ""}), on("nodeB", {"bar": ""})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")],
     [ANTI_AFFINITY, ANTI_AFFINITY]),
    ("existing pod's terms: label and key must both match (one key missing)",
     pod("in", {"foo": "", "bar": ""}),
     [on("nodeA", a=anti(term(exists("foo"), "invalid-node-label"),
                         term(exists("bar"), "zone")))],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")],
     [EXISTING_ANTI_AFFINITY, None]),
    ("incoming terms: label and key must both match (one key missing)",
     pod("in", aff=anti(term(exists("foo"), "invalid-node-label"),
                        term(exists("bar"), "zone"))),
     [on("nodeA", {"foo": "", "bar": ""})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")], [ANTI_AFFINITY, None]),
    ("existing pod's terms, both keys present",
     pod("in", {"foo": "", "bar": ""}),
     [on("nodeA", a=anti(term(exists("foo"), "region"), term(exists("bar"), "zone")))],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")],
     [EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY]),
    ("incoming terms, both keys present",
     pod("in", aff=anti(term(exists("foo"), "region"), term(exists("bar"), "zone"))),
     [on("nodeA", {"foo": "", "bar": ""})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")],
     [ANTI_AFFINITY, ANTI_AFFINITY]),
    ("only the node no existing pod's term selects the pod in is left",
     pod("in", {"foo": "", "bar": ""}),
     [on("nodeA", a=anti(term(exists("foo"), "zone"), term(exists("labelA"), "zone"))),
      on("nodeB", a=anti(term(exists("bar"), "zone"), term(exists("labelB"), "zone")))],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2"), zoned("nodeC", "r1", "z3")],
     [EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, None]),
    ("affinity: one pod matching every term, then every key on the node",
     pod("in", aff=req(term(exists("foo"), "region"), term(exists("bar"), "zone"))),
     [on("nodeA", {"foo": "", "bar": ""})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z1")], [None, None]),
    ("affinity: two pods matching one term each do not make one",
     pod("in", aff=req(term(exists("foo"), "region"), term(exists("bar"), "zone"))),
     [on("nodeA", {"foo": ""}), on("nodeB", {"bar": ""})],
     [zoned("nodeA", "r1", "z1"), zoned("nodeB", "r1", "z2")], [AFFINITY, AFFINITY]),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_several_nodes(incoming: Any, pods: list[Any], nodes: list[Any], want: Any) -> None:
    plugin = InterPodAffinity(handle())
    status, answers, _ = run_filter(plugin, incoming, snapshot_of(plugin, nodes, pods))
    if want == "skip":
        assert status.code is Code.SKIP
        return
    got = [answers[n["metadata"]["name"]] for n in nodes]
    assert [s.reasons[0] if s.reasons else None for s in got] == want


FOO_BAR_REGION = term(label_in("foo", "bar"), "region")
COMPLEX = [term(label_in("foo", "bar", "buzz"), "region"),
           term({"matchExpressions": [{"key": "service", "operator": "NotIn",
                                       "values": ["bar", "security", "test"]}]}, "zone")]
NODES = [node_obj("nodeA", {"region": "r1", "zone": "z11"}),
         node_obj("nodeB", {"region": "r1", "zone": "z12"}),
         node_obj("nodeC", {"region": "r2", "zone": "z21"})]


@pytest.mark.parametrize(("pending", "existing", "added", "want_anti", "want_affinity"), [
    (affinity(anti=[FOO_BAR_REGION]),
     [pod_obj("p1", {"foo": "bar"}, node="nodeA"),
      pod_obj("p2", node="nodeC", aff=affinity(anti=[FOO_BAR_REGION]))],
     pod_obj("added", {"foo": "bar"}, node="nodeB", aff=affinity(anti=[FOO_BAR_REGION])),
     {("region", "r1"): 2}, {}),
    (affinity(anti=COMPLEX),
     [pod_obj("p1", {"foo": "bar"}, node="nodeA"),
      pod_obj("p2", node="nodeC", aff=affinity(anti=[FOO_BAR_REGION]))],
     pod_obj("added", {"foo": "bar"}, node="nodeA", aff=affinity(anti=COMPLEX)),
     {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1}, {}),
    (affinity(required=COMPLEX),
     [pod_obj("p1", {"foo": "bar"}, node="nodeA"),
      pod_obj("p2", node="nodeC", aff=affinity(anti=[FOO_BAR_REGION], required=COMPLEX))],
     pod_obj("added", {"foo": "bar"}, node="nodeA", aff=affinity(anti=COMPLEX)),
     {}, {("region", "r1"): 2, ("zone", "z11"): 2}),
])
def test_adding_and_removing_a_pod_keeps_the_state_as_if_computed_afresh(
        pending: Any, existing: list[Any], added: Any, want_anti: Any,
        want_affinity: Any) -> None:
    plugin = InterPodAffinity(handle())
    incoming = pod("pending", {"foo": "bar"}, aff=pending)
    every = snapshot_of(plugin, NODES, [*existing, added])
    _, _, fresh = run_filter(plugin, incoming, every)
    snap = snapshot_of(plugin, NODES, existing)
    _, _, state = run_filter(plugin, incoming, snap)
    before = state.read(FILTER_KEY)
    clone = state.clone()
    node = snap.get(added["spec"]["nodeName"])
    assert node is not None
    added_info = pod("added", added["metadata"]["labels"], node=node.name,
                     aff=added["spec"].get("affinity"))
    assert plugin.add_pod(state, incoming, NodePod(added_info), node).ok
    after = state.read(FILTER_KEY)
    assert (after.anti_counts, after.affinity_counts) == (want_anti, want_affinity)
    assert after == fresh.read(FILTER_KEY)
    assert clone.read(FILTER_KEY) is before  # the clone does not see the change
    assert plugin.remove_pod(state, incoming, NodePod(added_info), node).ok
    assert state.read(FILTER_KEY) == before


def test_filter_without_pre_filter_is_an_error() -> None:
    plugin = InterPodAffinity(handle())
    snap = snapshot_of(plugin, NODES)
    status = plugin.filter(CycleState(0.0, snap), pod("in"), next(iter(snap)))
    assert status.code is Code.ERROR


@pytest.mark.parametrize(("event", "helps"), [
    (ClusterEvent("pod", "add", "n", obj=pod_obj("db", {"app": "db"}, node="n")), True),
    (ClusterEvent("pod", "add", "n", obj=pod_obj("web", {"app": "web"}, node="n")), False),
    (ClusterEvent("pod", "delete", "n", obj=pod_obj("db", {"app": "db"}, node="n")), False),
    (ClusterEvent("pod", "delete", "n", obj=pod_obj("x", {"app": "x"}, node="n")), True),
    (ClusterEvent("pod", "delete", "n", obj=pod_obj(
        "y", node="n", aff=affinity(anti=[term(exists("app"), "zone")]))), True),
    (ClusterEvent("pod", "update", "n", obj=pod_obj("z", node="n")), True),
    (ClusterEvent("node", "add", "n2"), True),
    (ClusterEvent("node", "update", "n2", changes=frozenset({"labels"})), True),
    (ClusterEvent("node", "update", "n2", changes=frozenset({"allocatable"})), False),
    (ClusterEvent("namespaces", "update", "", obj={"metadata": {"name": "ns"}}), False),
    (ClusterEvent("services", "add", "", obj={"metadata": {"name": "s"}}), False),
])
def test_what_may_help_a_rejected_pod(event: ClusterEvent, helps: bool) -> None:
    plugin = InterPodAffinity(handle())
    rejected = pod("in", {"app": "client"}, aff=affinity(
        required=[term(label_in("app", "db"), "zone")],
        anti=[term(label_in("app", "x"), "zone")]))
    assert plugin.could_help(rejected, event) is helps


A_AFF, B_AFF = term(exists("aaa"), "hostname"), term(exists("bbb"), "hostname")
C_AFF = term(exists("ccc"), "hostname")
H = ("hostname", "nodeA")


@pytest.mark.parametrize(("labels", "rules", "want_affinity", "want_anti"), [
    (None, affinity(), {}, {}),  # no terms: nothing counted
    ({"bbb": ""}, affinity(required=[A_AFF], anti=[A_AFF]), {}, {}),
    ({"aaa": ""}, affinity(required=[A_AFF], anti=[A_AFF]), {H: 1}, {H: 1}),
    # affinity counts once per term, for a pod matching all of them
    ({"aaa": "", "bbb": ""}, affinity(required=[A_AFF, B_AFF], anti=[A_AFF]), {H: 2}, {H: 1}),
    ({"aaa": ""}, affinity(required=[A_AFF, B_AFF], anti=[A_AFF, B_AFF]), {}, {H: 1}),
    ({"aaa": "", "bbb": ""}, affinity(required=[A_AFF, C_AFF], anti=[A_AFF, C_AFF]), {},
     {H: 1}),
    ({"bbb": ""}, affinity(required=[A_AFF, B_AFF], anti=[A_AFF, B_AFF]), {}, {H: 1}),
])
def test_counts_of_the_incoming_pods_terms(labels: Any, rules: Any, want_affinity: Any,
                                           want_anti: Any) -> None:
    plugin = InterPodAffinity(handle())
    snap = snapshot_of(plugin, [node_obj("nodeA", {"hostname": "nodeA"})],
                       [pod("normal", labels, node="nodeA")] if labels else [])
    status, _, state = run_filter(plugin, pod("in", aff=rules or None), snap)
    if not want_affinity and not want_anti and status.code is Code.SKIP:
        return
    got = state.read(FILTER_KEY)
    assert (got.affinity_counts, got.anti_counts) == (want_affinity, want_anti)
