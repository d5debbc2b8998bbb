"""Tiny traces end to end through the real scheduler (informers, framework, binding)."""

from __future__ import annotations

import pytest

from vgpu.cluster.memory import MemoryCluster
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_simulate import mapping, policies
from vgpu_simulate.gorand import GoRand
from vgpu_simulate.replay import EPOCH, replay, tie_order
from vgpu_simulate.trace import TraceNode, TracePod

NODES = [TraceNode("n0", 16000, 65536, 2, "T4"), TraceNode("n1", 16000, 65536, 2, "T4"),
         TraceNode("n2", 64000, 262144, 4, "G2")]


def pods() -> list[TracePod]:
    return [TracePod(f"p{i}", 2000, 1024, 1, m) for i, m in enumerate(
        [500, 500, 250, 1000, 750, 250])] + [
        TracePod("cpu", 4000, 4096, 0, 0), TracePod("quad", 8000, 4096, 4, 1000)]


@pytest.mark.parametrize("name", list(policies.POLICIES))
def test_every_policy_replays_through_the_scheduler(name: str) -> None:
    result = replay(NODES, pods(), policies.get(name), seed=3, inflate=0)
    assert result.pods == 8 and result.placed + result.failed == 8
    assert result.placed >= 7  # 8 GPUs; only the 4-GPU pod may miss its empty node
    arrived = [s.arrived_milli for s in result.samples]
    assert arrived == sorted(arrived) and arrived[-1] == 7250
    allocated = result.samples[-1].allocated_milli
    assert allocated <= 8000 and allocated >= 3250
    again = replay(NODES, pods(), policies.get(name), seed=3, inflate=0)
    assert again.samples == result.samples  # deterministic


def test_pods_that_fit_nowhere_are_dropped_and_the_rest_keep_coming() -> None:
    trace = [TracePod("big", 1000, 0, 8, 1000), TracePod("ok", 1000, 0, 1, 1000)]
    result = replay(NODES, trace, policies.get("fgd"), seed=1, inflate=0)
    assert (result.placed, result.failed) == (1, 1)
    assert result.samples[-1].allocated_milli == 1000


def test_fgd_fills_a_half_used_gpu_before_breaking_a_whole_one() -> None:
    nodes = [TraceNode("a", 32000, 65536, 2, "T4")]
    trace = [TracePod("h1", 1000, 0, 1, 500), TracePod("h2", 1000, 0, 1, 500),
             TracePod("w", 1000, 0, 1, 1000)]
    for name in ("fgd", "fragmentation-aware"):
        result = replay(nodes, trace, policies.get(name), seed=0, inflate=0)
        # The second half goes next to the first, so the whole-GPU pod still fits.
        assert result.placed == 3, name


def test_inflation_tops_the_list_up_to_the_target() -> None:
    result = replay(NODES, pods(), policies.get("bestfit"), seed=7, inflate=1.3)
    assert result.samples[-1].arrived_milli <= 1.3 * 8000
    assert result.pods > 8
    assert max(p for p, _ in result.curve) >= 100


def test_clustering_sees_the_kinds_its_own_bindings_put_on_nodes() -> None:
    policy = policies.get("clustering")
    config = policy.config()
    cluster = MemoryCluster(copy_objects=False)
    for node in (TraceNode("a", 64000, 65536, 2, "T4"), TraceNode("b", 64000, 65536, 2, "T4")):
        cluster.create("nodes", mapping.node_object(node, EPOCH))
    sched = Scheduler(config, cluster, clock=lambda: EPOCH,
                      registry=policy.registry([], GoRand(1)))
    trace = [TracePod("h1", 1000, 0, 1, 600), TracePod("w1", 1000, 0, 1, 1000),
             TracePod("h2", 1000, 0, 1, 400), TracePod("w2", 1000, 0, 1, 1000)]
    for pod in trace:
        cluster.create("pods", mapping.pod_object(pod, config))
        sched.run_until_idle()
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName")
              for p in cluster.list("pods").items}
    # The whole-GPU pod avoids the node holding a share; the second share joins the first
    # and the second whole GPU joins the first, each on the node holding only its kind.
    assert placed == {"h1": "a", "w1": "b", "h2": "a", "w2": "b"}



def test_ties_go_to_the_node_the_artifacts_name_prefix_puts_first() -> None:
    nodes = [TraceNode(n, 16000, 65536, 2, "T4") for n in ("b", "a", "c")]
    # By name a, b, c; the artifact names them "0002-a", "0000-b", "0001-c".
    assert [n.name for n in tie_order(nodes, (2, 0, 1))] == ["b", "c", "a"]
    # The scheduler breaks ties by creation order, which is what makes that order count:
    # equal nodes, one pod, and the first created wins whatever its name.
    for order in (["c", "a", "b"], ["b", "c", "a"]):
        policy = policies.get("fgd")
        config = policy.config()
        cluster = MemoryCluster(copy_objects=False)
        for name in order:
            cluster.create("nodes", mapping.node_object(
                TraceNode(name, 16000, 65536, 2, "T4"), EPOCH))
        sched = Scheduler(config, cluster, clock=lambda: EPOCH,
                          registry=policy.registry([], GoRand(1)))
        cluster.create("pods", mapping.pod_object(TracePod("p", 1000, 0, 1, 1000), config))
        sched.run_until_idle()
        assert cluster.get("pods", "p", mapping.NAMESPACE)["spec"]["nodeName"] == order[0]
