"""The differential test's cases without an API server: generation is deterministic and
valid, and the changes the test makes to a case (the documented differences'
neutralizing changes, the one-node probes) are what they claim to be for vgpu's rules,
checked by running the real scheduler on the in-memory cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.parity.case_objects import (
    DIFFERENCES,
    Names,
    drop_ineligible_spread_pods,
    neutralized,
    only_node,
    raise_overcommitted,
    render,
)
from tests.parity.large_cases import generate_large
from tests.parity.random_cases import (
    COMPLETED,
    HUGEPAGES,
    RUNTIME_OVERHEAD,
    TERMINATING,
    Case,
    NodeSpec,
    PodSpec,
    generate,
)
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.host.scheduler import Scheduler

NAMES = Names("m", "ns", "other", "vgpu-scheduler")
SAMPLE = [(seed, index) for seed in (1, 2, 3) for index in range(40)]


def decide(case: Case) -> int | None:
    """Where vgpu-scheduler puts the new pod of ``case`` (a node index), or None."""
    cluster = MemoryCluster()
    nodes, existing, new = render(case, NAMES)
    for node in nodes:
        cluster.create("nodes", node)
    for pod, state in existing:
        if state == TERMINATING:
            pod["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
        if state == COMPLETED:
            pod["status"] = {"phase": "Succeeded"}
        cluster.create("pods", pod)
    if new["spec"].get("runtimeClassName"):
        new["spec"]["overhead"] = dict(RUNTIME_OVERHEAD)  # what the admission adds
    cluster.create("pods", new)
    Scheduler(Config(), cluster).run_until_idle()
    bound = cluster.get("pods", "new", NAMES.namespace)["spec"].get("nodeName")
    return None if bound is None else [n["metadata"]["name"] for n in nodes].index(bound)


def test_a_case_depends_on_its_seed_and_index_only() -> None:
    assert generate(5, 3) == generate(5, 3)
    assert generate(5, 3) != generate(5, 4)
    assert generate(5, 3) != generate(6, 3)


@pytest.mark.parametrize(("seed", "index"), SAMPLE[:60])
def test_every_pod_is_one_the_api_server_accepts(seed: int, index: int) -> None:
    case = generate(seed, index)
    _, existing, new = render(case, NAMES)
    for pod in [new, *(p for p, _ in existing)]:
        info = parse(pod, Config())
        assert info.error is None, (pod, info.error)
        for container in [*pod["spec"]["containers"], *pod["spec"].get("initContainers", [])]:
            resources: dict[str, Any] = container["resources"]
            if HUGEPAGES in resources.get("limits", {}):  # v1.20's validation
                assert resources["requests"].get("memory")
        keys = [c["topologyKey"] for c in pod["spec"].get("topologySpreadConstraints", [])]
        assert len(keys) == len(set(keys))


def _node(alloc: dict[str, str], **labels: str) -> NodeSpec:
    return NodeSpec(labels, (), False, {"cpu": "2", "memory": "2Gi", "pods": "110", **alloc}, 0)


def _pod(node: int | None, requests: dict[str, str], labels: dict[str, str] | None = None,
         **spec: Any) -> PodSpec:
    return PodSpec(labels or {}, {"containers": [{"name": "c", "resources": {
        "requests": requests}}], **spec}, node)


def test_raising_overcommitted_resources() -> None:
    case = Case(0, 0, (_node({}), _node({"ephemeral-storage": "1Gi"})),
                (_pod(0, {"cpu": "1500m"}), _pod(0, {"cpu": "1"}),
                 _pod(1, {"ephemeral-storage": "2Gi", "memory": "1Gi"})),
                _pod(None, {"cpu": "100m"}))
    changed = raise_overcommitted(case)
    assert changed is not None
    assert changed.nodes[0].allocatable["cpu"] == "2500m"
    assert changed.nodes[1].allocatable["ephemeral-storage"] == str(2 << 30)
    assert changed.nodes[1].allocatable["memory"] == "2Gi"
    assert raise_overcommitted(changed) is None


def test_dropping_the_spread_pods_of_ineligible_nodes() -> None:
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "a"}}}]
    nodes = (_node({}, zone="z0", disk="ssd"), _node({}, zone="z0"), _node({}, zone="z1"))
    existing = (_pod(1, {}, {"app": "a"}), _pod(1, {}, {"app": "b"}), _pod(0, {}, {"app": "a"}))
    case = Case(0, 0, nodes, existing, _pod(None, {}, {"app": "a"}, nodeSelector={
        "disk": "ssd"}, topologySpreadConstraints=spread))
    changed = drop_ineligible_spread_pods(case)
    assert changed is not None and changed.existing == existing[1:]
    assert drop_ineligible_spread_pods(changed) is None
    no_selector = Case(0, 0, nodes, existing, _pod(None, {}, topologySpreadConstraints=spread))
    assert drop_ineligible_spread_pods(no_selector) is None


@pytest.mark.parametrize(("seed", "index"), SAMPLE)
def test_the_changes_do_not_change_vgpus_decision(seed: int, index: int) -> None:
    case = generate(seed, index)
    node = decide(case)
    for differences, changed in neutralized(case):
        assert (decide(changed) is None) == (node is None), [d.key for d in differences]
    if node is not None:
        assert decide(only_node(case, node)) == node


def test_every_difference_is_documented() -> None:
    page = (Path(__file__).parents[2] / "docs" / "scheduler.md").read_text()
    section = page.split("\n## Known differences\n", 1)[1].split("\n## ", 1)[0]
    for difference in DIFFERENCES:
        assert f"`{difference.key}`" in section, difference.key


@pytest.mark.parametrize("index", range(6))
def test_a_large_case_goes_where_its_soft_rules_point_among_every_feasible_node(
        index: int) -> None:
    case = generate_large(30, index)
    assert len(case.nodes) > 100 and case.best is not None
    assert decide(case) == case.best
    # Every other feasible node is one the pod could go to.
    feasible = [i for i, n in enumerate(case.nodes)
                if not n.taints and not n.unschedulable and n.allocatable["pods"] != "0"]
    assert case.best in feasible and len(feasible) <= 100
    assert decide(only_node(case, next(i for i in feasible if i != case.best))) is not None
