"""InterPodAffinity's scoring, case by case as kube-scheduler's ``scoring_test.go``
(``TestPreferredAffinity``, ``TestPreferredAffinityWithHardPodAffinitySymmetricWeight``):
normalized scores per node, or the PreScore skip."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.affinity_support import (
    affinity,
    exists,
    handle,
    label_in,
    namespace,
    node_obj,
    pod,
    run_score,
    snapshot_of,
    term,
    weighted,
)
from vgpu.config import Config, InterPodAffinityArgs, SchedulerConfig
from vgpu_scheduler.framework.status import Code, Status
from vgpu_scheduler.plugins.kube.interpod_affinity import InterPodAffinity

CHINA, INDIA, AZ1, AZ2 = ({"region": "China"}, {"region": "India"}, {"az": "az1"},
                          {"az": "az2"})
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1, S2 = {"security": "S1"}, {"security": "S2"}
NAMESPACES = [namespace("subteam1.team1", team="team1"), namespace("subteam2.team1", team="team1"),
              namespace("subteam1.team2", team="team2"), namespace("subteam2.team2", team="team2")]
TEAM1 = label_in("team", "team1")

STAY_S1_REGION = affinity(preferred=[weighted(5, term(label_in("security", "S1"), "region"))])
STAY_S2_REGION = affinity(preferred=[weighted(6, term(label_in("security", "S2"), "region"))])
AFFINITY3 = affinity(preferred=[
    weighted(8, term({"matchExpressions": [
        {"key": "security", "operator": "NotIn", "values": ["S1"]},
        {"key": "security", "operator": "In", "values": ["S2"]}]}, "region")),
    weighted(2, term({"matchExpressions": [
        {"key": "security", "operator": "Exists"},
        {"key": "wrongkey", "operator": "DoesNotExist"}]}, "region"))])
HARD = affinity(required=[
    term(label_in("security", "S1", "value2"), "region"),
    term({"matchExpressions": [{"key": "security", "operator": "Exists"},
                               {"key": "wrongkey", "operator": "DoesNotExist"}]}, "region")])
AWAY_S1_AZ = affinity(preferred_anti=[weighted(5, term(label_in("security", "S1"), "az"))])
AWAY_S2_AZ = affinity(preferred_anti=[weighted(5, term(label_in("security", "S2"), "az"))])
STAY_S1_AWAY_S2 = affinity(preferred=[weighted(8, term(label_in("security", "S1"), "region"))],
                           preferred_anti=[weighted(5, term(label_in("security", "S2"), "az"))])
NS_TERM = term(label_in("security", "S1"), "region", namespaces=["subteam2.team2"],
               ns_selector=TEAM1)
AFFINITY_NS = affinity(preferred=[weighted(5, NS_TERM)])
ANTI_NS = affinity(preferred_anti=[weighted(5, NS_TERM)])


def n(*labels: dict[str, str]) -> list[Any]:
    return [node_obj(f"node{i}", lab) for i, lab in enumerate(labels, 1)]


def on(i: int, labels: dict[str, str] | None = None, a: Any = None, ns: str = "default") -> Any:
    return (i, labels, a, ns)


SKIP = "skip"
# (name, incoming pod, existing pods as (node number, labels, affinity, namespace), nodes,
#  the normalized scores or SKIP)
CASES: list[tuple[str, Any, list[Any], list[Any], Any]] = [
    ("no terms anywhere", pod("in", S1), [], n(CHINA, INDIA, AZ1), SKIP),
    ("the region of a matching pod scores", pod("in", S1, aff=STAY_S1_REGION),
     [on(1, S1), on(2, S2), on(3, S1)], n(CHINA, INDIA, AZ1), [100, 0, 0]),
    ("every node of that region scores alike", pod("in", aff=STAY_S1_REGION), [on(1, S1)],
     n(CHINA, CHINA_AZ1, INDIA), [100, 100, 0]),
    ("the region with more matching pods scores higher", pod("in", S1, aff=STAY_S2_REGION),
     [on(1, S2), on(1, S2), on(2, S2), on(3, S2), on(4, S2), on(5, S2)],
     n(CHINA, INDIA, CHINA, CHINA, INDIA), [100, 0, 100, 100, 0]),
    ("several operators and weights", pod("in", S1, aff=AFFINITY3),
     [on(1, S1), on(2, S2), on(3, S1)], n(CHINA, INDIA, AZ1), [20, 100, 0]),
    ("symmetry: existing pods' preferred affinity", pod("in", S2),
     [on(1, S1, STAY_S1_REGION), on(2, S2, STAY_S2_REGION)], n(CHINA, INDIA, AZ1), [0, 100, 0]),
    ("symmetry through a namespace selector", pod("in", S1, namespace="subteam1.team1"),
     [on(1, S1, AFFINITY_NS), on(2, S2, STAY_S2_REGION)], n(CHINA, INDIA, AZ1), [100, 0, 0]),
    ("anti-affinity symmetry through a namespace selector",
     pod("in", S1, namespace="subteam1.team1"),
     [on(1, S1, ANTI_NS), on(2, S2, STAY_S2_REGION)], n(CHINA, INDIA, AZ1), [0, 100, 100]),
    ("symmetry: existing pods' required affinity at hardPodAffinityWeight", pod("in", S1),
     [on(1, S1, HARD), on(2, S2, HARD)], n(CHINA, INDIA, AZ1), [100, 100, 0]),
    ("anti-affinity: the zone of a matching pod scores least",
     pod("in", S1, aff=AWAY_S1_AZ), [on(1, S1), on(2, S2)], n(AZ1, CHINA), [0, 100]),
    ("anti-affinity: a node without the key escapes it",
     pod("in", S1, aff=AWAY_S1_AZ), [on(1, S1), on(2, S1)], n(AZ1, CHINA), [0, 100]),
    ("anti-affinity: more matching pods, less score",
     pod("in", S1, aff=AWAY_S1_AZ), [on(1, S1), on(1, S1), on(2, S2)], n(AZ1, INDIA),
     [0, 100]),
    ("anti-affinity symmetry", pod("in", S2),
     [on(1, S1, AWAY_S2_AZ), on(2, S2, AWAY_S1_AZ)], n(AZ1, AZ2), [0, 100]),
    ("affinity and anti-affinity together", pod("in", S1, aff=STAY_S1_AWAY_S2),
     [on(1, S1), on(2, S1)], n(CHINA, AZ1), [100, 0]),
    ("together, the pod and the existing pods alike",
     pod("in", S1, aff=STAY_S1_AWAY_S2),
     [on(1, S1), on(1, S1), on(2, S1), on(3, S1), on(3, S1), on(4, S1), on(5, S1)],
     n(CHINA_AZ1, INDIA, CHINA, CHINA, INDIA), [100, 0, 100, 100, 0]),
    ("affinity, anti-affinity and both symmetries", pod("in", S1, aff=STAY_S1_AWAY_S2),
     [on(1, S1), on(2, S2), on(3, None, STAY_S1_AWAY_S2), on(4, None, AWAY_S1_AZ)],
     n(CHINA, AZ1, INDIA, AZ2), [100, 0, 100, 0]),
    ("a domain only partly holding pods with terms", pod("in", S1),
     [on(1, S1), on(2, None, STAY_S1_AWAY_S2)], n(CHINA, CHINA), [0, 0]),
    ("the pod's namespace selector chooses the pods",
     pod("in", S1, namespace="subteam1.team1", aff=AFFINITY_NS),
     [on(1, S1, ns="subteam1.team1"), on(1, S1, ns="subteam1.team1"),
      on(1, S1, ns="subteam1.team2"), on(2, S1, ns="subteam2.team1")],
     n(CHINA, INDIA), [100, 0]),
    ("its namespaces and its namespace selector both choose",
     pod("in", S1, namespace="subteam1.team1", aff=AFFINITY_NS),
     [on(1, S1, ns="subteam1.team1"), on(1, S1, ns="subteam1.team1"),
      on(1, S1, ns="subteam2.team2"), on(2, S1, ns="subteam2.team1")],
     n(CHINA, INDIA), [100, 0]),
    ("anti-affinity through the pod's namespace selector",
     pod("in", S1, namespace="subteam1.team1", aff=ANTI_NS),
     [on(1, S1, ns="subteam1.team1"), on(1, S1, ns="subteam1.team1"),
      on(1, S1, ns="subteam1.team2"), on(2, S1, ns="subteam2.team1")],
     n(CHINA, INDIA), [0, 100]),
    ("anti-affinity through its namespaces and namespace selector",
     pod("in", S1, namespace="subteam1.team1", aff=ANTI_NS),
     [on(1, S1, ns="subteam1.team1"), on(1, S1, ns="subteam1.team1"),
      on(1, S1, ns="subteam2.team2"), on(2, S1, ns="subteam2.team1")],
     n(CHINA, INDIA), [0, 100]),
    ("existing pods' preferred terms count by default", pod("in", S2),
     [on(1, S1, STAY_S1_AWAY_S2), on(2, S2, STAY_S2_REGION)], n(CHINA, INDIA), [0, 100]),
    ("no nodes", pod("in", S2), [], [], SKIP),
]


def existing_pods(pods: list[Any]) -> list[Any]:
    return [pod(f"e{k}", labels, node=f"node{i}", namespace=ns, aff=a)
            for k, (i, labels, a, ns) in enumerate(pods)]


def scores(incoming: Any, pods: list[Any], nodes: list[Any],
           args: InterPodAffinityArgs | None = None) -> Any:
    config = Config(scheduler=SchedulerConfig(inter_pod_affinity=args or InterPodAffinityArgs()))
    plugin = InterPodAffinity(handle(config, namespaces=NAMESPACES))
    got = run_score(plugin, incoming, snapshot_of(plugin, nodes, existing_pods(pods)))
    if isinstance(got, Status):
        assert got.code is Code.SKIP
        return SKIP
    return [got[node["metadata"]["name"]] for node in nodes]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_preferred_affinity(incoming: Any, pods: list[Any], nodes: list[Any], want: Any) -> None:
    assert scores(incoming, pods, nodes) == want


def test_existing_pods_preferred_terms_can_be_ignored() -> None:
    args = InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True)
    assert scores(pod("in", S2), [on(1, S1, STAY_S1_AWAY_S2), on(2, S2, STAY_S2_REGION)],
                  n(CHINA, INDIA), args) == SKIP


HARD_NS = affinity(required=[term(label_in("service", "S1"), "region",
                                  namespaces=["default", "subteam2.team2"], ns_selector=TEAM1)])


@pytest.mark.parametrize(("weight", "ns", "want"), [
    (1, "default", [100, 100, 0]),
    (0, "default", SKIP),  # weight 0: existing pods' required terms do not score
    (1, "subteam1.team2", SKIP),  # neither listed nor selected
    (1, "subteam1.team1", [100, 100, 0]),  # selected by the namespace selector
    (1, "subteam2.team2", [100, 100, 0]),  # listed
])
def test_hard_pod_affinity_weight(weight: int, ns: str, want: Any) -> None:
    got = scores(pod("in", {"service": "S1"}, namespace=ns),
                 [on(1, None, HARD_NS), on(2, None, HARD_NS)], n(CHINA, INDIA, AZ1),
                 InterPodAffinityArgs(hard_pod_affinity_weight=weight))
    assert got == want


def test_a_pod_with_preferred_terms_has_nothing_to_skip_even_on_an_empty_cluster() -> None:
    got = scores(pod("in", S1, aff=AWAY_S1_AZ), [], n(AZ1, AZ2))
    assert got == SKIP  # kube: no node gets a topology score at all
    assert scores(pod("in", S1, aff=affinity(preferred=[weighted(3, term(exists("security"),
                                                                          "az"))])),
                  [on(2, S2)], n(AZ1, AZ2)) == [0, 100]
