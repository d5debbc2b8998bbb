"""InterPodAffinity's Filter, case by case as kube-scheduler's ``filtering_test.go``
(``TestRequiredAffinitySingleNode``, ``TestRequiredAffinityMultipleNodes``), in our own
words: the incoming pod, the pods already placed, the nodes, and each node's answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.affinity_support import (
    affinity,
    exists,
    handle,
    label_in,
    label_not_in,
    namespace,
    node_obj,
    pod,
    run_filter,
    snapshot_of,
    term,
)
from vgpu.config import Config
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube.interpod_affinity import InterPodAffinity
from vgpu_scheduler.plugins.kube.interpod_affinity.filtering import (
    AFFINITY,
    ANTI_AFFINITY,
    EXISTING_ANTI_AFFINITY,
)

SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
NAMESPACES = [namespace("subteam1.team1", team="team1"), namespace("subteam2.team1", team="team1"),
              namespace("subteam1.team2", team="team2"), namespace("subteam2.team2", team="team2")]
TEAM1 = label_in("team", "team1")
SKIP = "skip"
OK = None


def aff(*req: Any) -> dict[str, Any]:
    return affinity(required=req)


def anti(*req: Any) -> dict[str, Any]:
    return affinity(anti=req)


def both(req: Any, anti_term: Any) -> dict[str, Any]:
    return affinity(required=[req], anti=[anti_term])


def existing(labels: dict[str, str] | None = None, node: str = "node1", ns: str = "default",
             a: dict[str, Any] | None = None, name: str = "existing") -> Any:
    return pod(name, labels, node=node, namespace=ns, aff=a)


SCAN_IN_REGION = term(label_in("service", "securityscan", "value2"), "region")
ANTIVIRUS_ON_NODE = term(label_in("service", "antivirusscan", "value2"), "node")
SCAN_IN_ZONE = term(label_in("service", "securityscan", "value2"), "zone")

# (name, incoming pod, pods on node1, expected on node1: a Filter reason, OK or SKIP)
SINGLE_NODE = [
    ("no terms, no pods: nothing to check", pod("in"), [], SKIP),
    ("affinity In matches the pod in the region", pod("in", S1, aff=aff(SCAN_IN_REGION)),
     [existing(SCAN)], OK),
    ("affinity NotIn matches the pod in the region",
     pod("in", S1, aff=aff(term(label_not_in("service", "securityscan3", "value3"), "region"))),
     [existing(SCAN)], OK),
    ("a pod in another namespace than the term's does not count",
     pod("in", S1, aff=aff(term(label_in("service", "securityscan", "value2"), "region",
                                namespaces=["DiffNameSpace"]))),
     [existing(SCAN, ns="ns")], AFFINITY),
    ("the selector matches no pod",
     pod("in", SCAN, aff=aff(term(label_in("service", "antivirusscan", "value2"), ""))),
     [existing(SCAN)], AFFINITY),
    ("several terms, each of several requirements, all met by one pod",
     pod("in", S1, aff=aff(term({"matchExpressions": [
         {"key": "service", "operator": "Exists"},
         {"key": "wrongkey", "operator": "DoesNotExist"}]}, "region"),
         term({"matchExpressions": [
             {"key": "service", "operator": "In", "values": ["securityscan"]},
             {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]}, "region"))),
     [existing(SCAN)], OK),
    ("requirements are ANDed: one unmet fails the term",
     pod("in", S1, aff=aff(term(exists("service"), "region"), term({"matchExpressions": [
         {"key": "service", "operator": "In", "values": ["securityscan2"]},
         {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]}, "region"))),
     [existing(SCAN)], AFFINITY),
    ("affinity met, anti-affinity not triggered",
     pod("in", S1, aff=both(SCAN_IN_REGION, ANTIVIRUS_ON_NODE)), [existing(SCAN)], OK),
    ("the existing pod's anti-affinity does not select the incoming pod",
     pod("in", S1, aff=both(SCAN_IN_REGION, ANTIVIRUS_ON_NODE)),
     [existing(SCAN, a=anti(ANTIVIRUS_ON_NODE))], OK),
    ("affinity met but the anti-affinity selects the pod in the zone",
     pod("in", S1, aff=both(SCAN_IN_REGION, SCAN_IN_ZONE)), [existing(SCAN)], ANTI_AFFINITY),
    ("the existing pod's anti-affinity selects the incoming pod",
     pod("in", SCAN, aff=both(SCAN_IN_REGION, ANTIVIRUS_ON_NODE)),
     [existing(SCAN, a=anti(SCAN_IN_ZONE))], EXISTING_ANTI_AFFINITY),
    ("the matching pod is on a node not in the cluster, the pod does not match itself",
     pod("in", SCAN, aff=aff(term(label_not_in("service", "securityscan", "value2"),
                                  "region"))),
     [existing(SCAN, node="node2")], AFFINITY),
    ("existing anti-affinity applies to a pod without terms",
     pod("in", SCAN), [existing(SCAN, a=anti(SCAN_IN_ZONE))], EXISTING_ANTI_AFFINITY),
    ("existing anti-affinity that does not select the pod: nothing to check",
     pod("in", SCAN),
     [existing(SCAN, a=anti(term(label_not_in("service", "securityscan", "value2"), "zone")))],
     SKIP),
    ("incoming anti-affinity selects the existing pod although the reverse also holds",
     pod("in", SCAN, aff=anti(term(exists("service"), "region"),
                              term(exists("security"), "region"))),
     [existing(S1, a=anti(term(exists("security"), "zone")))], ANTI_AFFINITY),
    ("symmetry a1: the incoming pod's terms select the existing pod first",
     pod("in", SCAN, aff=anti(term(exists("service"), "zone"), term(exists("security"), "zone"))),
     [existing(S1, a=anti(term(exists("security"), "zone")))], ANTI_AFFINITY),
    ("symmetry a2: only the existing pod's term selects",
     pod("in", S1, aff=anti(term(exists("security"), "zone"))),
     [existing(SCAN, a=anti(term(exists("service"), "zone"), term(exists("security"), "zone")))],
     EXISTING_ANTI_AFFINITY),
    ("symmetry b1: both select each other; the incoming pod's rule is reported",
     pod("in", {"abc": "", "xyz": ""}, aff=anti(term(exists("abc"), "zone"),
                                                term(exists("def"), "zone"))),
     [existing({"def": "", "xyz": ""}, a=anti(term(exists("abc"), "zone"),
                                              term(exists("def"), "zone")))], ANTI_AFFINITY),
    ("symmetry b2",
     pod("in", {"def": "", "xyz": ""}, aff=anti(term(exists("abc"), "zone"),
                                                term(exists("def"), "zone"))),
     [existing({"abc": "", "xyz": ""}, a=anti(term(exists("abc"), "zone"),
                                              term(exists("def"), "zone")))], ANTI_AFFINITY),
    ("affinity through a namespace selector",
     pod("in", S1, aff=aff(term(label_in("service", "securityscan", "value2"), "region",
                                ns_selector=TEAM1))),
     [existing(SCAN, ns="subteam1.team1")], OK),
    ("the namespace selector does not select the pod's namespace",
     pod("in", S1, aff=aff(term(label_in("service", "securityscan", "value2"), "region",
                                ns_selector=TEAM1))),
     [existing(SCAN, ns="subteam1.team2")], AFFINITY),
    ("anti-affinity through a namespace selector",
     pod("in", S1, namespace="subteam1.team1", aff=anti(term(
         label_in("service", "securityscan", "value2"), "zone", ns_selector=TEAM1))),
     [existing(SCAN, ns="subteam2.team1")], ANTI_AFFINITY),
    ("an empty namespace selector selects every namespace",
     pod("in", S1, namespace="subteam1.team1", aff=anti(term(
         label_in("service", "securityscan", "value2"), "zone", ns_selector={}))),
     [existing(SCAN, ns="subteam2.team1")], ANTI_AFFINITY),
    ("anti-affinity whose namespace selector leaves the pod out",
     pod("in", S1, namespace="subteam1.team1", aff=anti(term(
         label_in("service", "securityscan", "value2"), "zone", ns_selector=TEAM1))),
     [existing(SCAN, ns="subteam1.team2")], OK),
]


@pytest.mark.parametrize(("incoming", "pods", "want"),
                         [c[1:] for c in SINGLE_NODE], ids=[c[0] for c in SINGLE_NODE])
def test_one_node(incoming: Any, pods: list[Any], want: str | None) -> None:
    plugin = InterPodAffinity(handle(namespaces=NAMESPACES))
    snap = snapshot_of(plugin, [node_obj("node1", {"region": "r1", "zone": "z11"})], pods)
    status, answers, _ = run_filter(plugin, incoming, snap)
    if want == SKIP:
        assert status.code is Code.SKIP
        return
    got = answers["node1"]
    assert got.reasons == (() if want is None else (want,))
    if want == AFFINITY:
        assert got.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    elif want is not None:
        assert got.code is Code.UNSCHEDULABLE


def test_a_bad_label_value_in_a_term_makes_the_pod_unschedulable_as_written() -> None:
    obj = pod("ok").pod
    obj["spec"]["affinity"] = aff(term(label_in("service", "{{.bad-value.}}"), "region"))
    info = parse(obj, Config())
    assert info.error is not None and "{{.bad-value.}}" in info.error
    assert "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]" in info.error
