"""The pod being scheduled may already hold room on a node it was nominated for (after a
preemption); kube-scheduler's snapshot never contains the pod it schedules, so neither
plugin counts the pod against itself."""

from __future__ import annotations

from tests.scheduler.affinity_support import (
    affinity,
    handle,
    label_in,
    node_obj,
    pod,
    run_filter,
    run_score,
    snapshot_of,
    spread,
    term,
    weighted,
)
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube.interpod_affinity import InterPodAffinity
from vgpu_scheduler.plugins.kube.pod_topology_spread import PodTopologySpread

NODES = [node_obj("n1", {"host": "n1", "kubernetes.io/hostname": "n1"}),
         node_obj("n2", {"host": "n2", "kubernetes.io/hostname": "n2"})]
WEB = {"app": "web"}
SELF = label_in("app", "web")


def test_anti_affinity_to_its_own_kind_does_not_keep_it_off_its_nominated_node() -> None:
    plugin = InterPodAffinity(handle())
    rules = affinity(anti=[term(SELF, "host")])
    nominated = pod("p", WEB, node="n1", aff=rules)
    status, answers, _ = run_filter(plugin, pod("p", WEB, aff=rules),
                                    snapshot_of(plugin, NODES, [nominated]))
    assert status.code is Code.SKIP or all(s.ok for s in answers.values())


def test_preferred_anti_affinity_scores_as_if_it_were_not_there() -> None:
    plugin = InterPodAffinity(handle())
    rules = affinity(preferred_anti=[weighted(10, term(SELF, "host"))])
    nominated = pod("p", WEB, node="n1", aff=rules)
    got = run_score(plugin, pod("p", WEB, aff=rules), snapshot_of(plugin, NODES, [nominated]))
    assert got == {"n1": 0.0, "n2": 0.0}


def test_spread_counts_neither_its_filter_nor_its_score() -> None:
    plugin = PodTopologySpread(handle())
    hard = [spread(1, "host", {"matchLabels": WEB})]
    nominated = pod("p", WEB, node="n1", constraints=hard)
    _, answers, _ = run_filter(plugin, pod("p", WEB, constraints=hard),
                               snapshot_of(plugin, NODES, [nominated]))
    assert all(s.ok for s in answers.values())
    for key in ("host", "kubernetes.io/hostname"):
        soft = [spread(1, key, {"matchLabels": WEB}, hard=False)]
        nominated = pod("p", WEB, node="n1", constraints=soft)
        got = run_score(plugin, pod("p", WEB, constraints=soft),
                        snapshot_of(plugin, NODES, [nominated]))
        assert got == {"n1": 100.0, "n2": 100.0}, key
