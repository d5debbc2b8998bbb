"""HAMi's node policies (hami-binpack, hami-spread) as the vGPU plugin's node scores over
the candidates: the vectorised score is the scalar one to the bit, and through the
scheduler they are weighed with the pod's soft rules as every GPU placement policy is."""

from __future__ import annotations

import pytest

from tests.scheduler.e2e_support import setup
from tests.scheduler.test_hami_placement import _sized_node, _where, gpus, node
from vgpu import builders
from vgpu.annotations import BIND_PHASE, PHASE_SUCCESS
from vgpu.devices import Usage
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.placement import place as placement
from vgpu_scheduler.placement import policies


@pytest.mark.parametrize("name", ["hami-binpack", "hami-spread"])
def test_hami_node_policies_score_every_node_as_they_score_one(name: str) -> None:
    # The framework reads the candidates' scores from the vectorised form: it must be the
    # scalar score to the bit, or ties and near-ties go another way than the Filter's.
    infos = [node(f"n{i}", gpus(*[16384 + 1000 * i] * (1 + i % 3)),
                  [Usage(700 * i * k, 3 * i, i % 5) for k in range(1 + i % 3)])
             for i in range(20)]
    snapshot = Snapshot()
    for info in infos:
        snapshot.set(info)
    pol = policies.NODE_POLICIES[name]
    assert pol.scores is not None
    got = pol.scores(snapshot, 0, 0, slice(None))
    p = placement.Placement((), 1000, 10)
    for info in infos:
        assert got[snapshot.positions[info.name]] == pol.score(info, p)
    assert got.min() >= 0.0 and got.max() <= 100.0


def _pinned(name: str, host: str, mib: int, cores: int) -> dict[str, object]:
    return builders.pod(name, [builders.container(gpumem=mib, cores=cores)], namespace="team",
                        nodeSelector={"kubernetes.io/hostname": host})


def _policy_pod(policy: str, prefer: str | None = None) -> dict[str, object]:
    pod = builders.pod("p", [builders.container(gpumem=1000, cores=10)], namespace="team",
                       annotations={"vgpu.io/node-scheduler-policy": policy})
    if prefer is not None:
        pod["spec"]["affinity"] = {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
                "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                      "values": [prefer]}]}}]}}
    return pod


@pytest.mark.parametrize(("policy", "prefer", "want"), [
    # Issue 47, case 1, through the scheduler: a runs six small tasks, b one large.
    ("hami-binpack", None, "a"),
    ("hami-spread", None, "b"),
    ("binpack", None, "b"),  # vgpu's own: the node with the pod placed
    # A GPU node policy is a score among the candidates, weighed with the pod's soft rules:
    # the pod's preferred node affinity (200 points) outweighs it (100 at most).
    ("hami-binpack", "b", "b"),
    ("hami-spread", "a", "a"),
])
def test_hami_node_policies_are_scores_weighed_with_soft_rules(policy: str, prefer: str | None,
                                                                want: str) -> None:
    sched, cluster, _ = setup([_sized_node("a", [16384]), _sized_node("b", [16384])])
    for i in range(6):
        cluster.create("pods", _pinned(f"small-{i}", "a", 100, 1))
    cluster.create("pods", _pinned("large", "b", 2000, 20))
    sched.run_until_idle()
    for name in [*(f"small-{i}" for i in range(6)), "large"]:
        assert _where(cluster, name).startswith("GPU-")
        cluster.patch_annotations("pods", name, {BIND_PHASE: PHASE_SUCCESS}, "team")
    cluster.create("pods", _policy_pod(policy, prefer))
    sched.run_until_idle()
    assert _where(cluster, "p").startswith(f"GPU-{want}-")
