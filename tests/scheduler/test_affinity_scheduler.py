"""The real scheduler on the in-memory cluster with the default profile: Deployments with
anti-affinity one per node, pods that need another app beside them, topology spread
across zones (hard and soft), and the kube-style summary of the pods left Pending."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.scheduler.affinity_support import affinity, label_in, spread, term
from tests.scheduler.e2e_support import gpu_node, node_of, setup
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import DEFAULT_SCHEDULER_PLUGINS, Config, SchedulerConfig

# No node agent here to finish allocations, so no allocation gate.
CONFIG = Config(scheduler=SchedulerConfig(
    plugins=tuple(p for p in DEFAULT_SCHEDULER_PLUGINS if p != "AllocationGate")))
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def zoned_nodes(count: int, gpus: int = 4) -> list[Obj]:
    return [gpu_node(f"n{i}", gpus, labels={ZONE: f"z{i % 2}"}) for i in range(count)]


def replica(name: str, labels: dict[str, str], **spec: Any) -> Obj:
    obj = builders.pod(name, **spec)
    obj["metadata"]["labels"] = labels
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                           "name": labels.get("app", "rs"),
                                           "controller": True}]
    return obj


def create(cluster: MemoryCluster, *objs: Obj) -> None:
    for obj in objs:
        cluster.create("pods", obj)


def zone_of(cluster: MemoryCluster, pod: str) -> str:
    node = node_of(cluster, pod)
    assert node is not None, pod
    return f"z{int(node[1:]) % 2}"


ONE_PER_NODE = affinity(anti=[term(label_in("app", "web"), HOST)])


def test_anti_affinity_one_replica_per_node_and_the_rest_pending() -> None:
    sched, cluster, clock = setup(zoned_nodes(3), CONFIG)
    create(cluster, *(replica(f"web-{i}", {"app": "web"}, affinity=ONE_PER_NODE)
                      for i in range(5)))
    sched.run_until_idle()
    placed = [node_of(cluster, f"web-{i}") for i in range(5)]
    assert sorted(n for n in placed if n) == ["n0", "n1", "n2"]
    pending = [f"web-{i}" for i, n in enumerate(placed) if n is None]
    assert len(pending) == 2
    for name in pending:
        message = cluster.events(name=name, reason="FailedScheduling")[-1].message
        # Anti-affinity is curable by eviction (kube's Unschedulable); equal priorities
        # leave no victims.
        assert message == ("0/3 nodes are available: 3 node(s) didn't match pod "
                           "anti-affinity rules. preemption: 0/3 nodes are available: 3 No "
                           "preemption victims found for incoming pod.")
    # One replica goes away: a pending one takes its node.
    gone = next(f"web-{i}" for i, n in enumerate(placed) if n == "n1")
    cluster.delete("pods", gone, "default")
    sched.run_until_idle()
    clock.advance(2)  # the deletion woke both; their backoff runs out
    sched.run_until_idle()
    assert {node_of(cluster, p) for p in pending} == {"n1", None}


def test_existing_pods_anti_affinity_keeps_other_pods_away() -> None:
    sched, cluster, _ = setup(zoned_nodes(2), CONFIG)
    lonely = affinity(anti=[term(label_in("team", "noisy"), ZONE)])
    create(cluster, replica("quiet", {"app": "quiet"}, affinity=lonely,
                            nodeSelector={HOST: "n0"}))
    sched.run_until_idle()
    create(cluster, replica("noisy", {"team": "noisy"}))
    sched.run_until_idle()
    assert (node_of(cluster, "quiet"), zone_of(cluster, "noisy")) == ("n0", "z1")


def test_required_affinity_waits_for_the_other_app_then_joins_it() -> None:
    sched, cluster, clock = setup(zoned_nodes(4), CONFIG)
    near_db = affinity(required=[term(label_in("app", "db"), ZONE)])
    create(cluster, replica("client", {"app": "client"}, affinity=near_db))
    sched.run_until_idle()
    assert node_of(cluster, "client") is None
    assert cluster.events(name="client", reason="FailedScheduling")[-1].message == (
        # Unmatched required affinity is UnschedulableAndUnresolvable, as in kube-scheduler.
        "0/4 nodes are available: 4 node(s) didn't match pod affinity rules. preemption: 0/4 "
        "nodes are available: 4 Preemption is not helpful for scheduling.")
    create(cluster, replica("db", {"app": "db"}, nodeSelector={HOST: "n3"}))
    sched.run_until_idle()
    clock.advance(2)  # the db pod's arrival woke the client; its backoff runs out
    sched.run_until_idle()
    assert zone_of(cluster, "client") == zone_of(cluster, "db") == "z1"


def test_the_first_of_a_group_with_affinity_to_itself_is_not_stuck() -> None:
    sched, cluster, _ = setup(zoned_nodes(4), CONFIG)
    together = affinity(required=[term(label_in("app", "pack"), ZONE)])
    create(cluster, *(replica(f"pack-{i}", {"app": "pack"}, affinity=together)
                      for i in range(4)))
    sched.run_until_idle()
    assert len({zone_of(cluster, f"pack-{i}") for i in range(4)}) == 1


def hard_zone(app: str, skew: int = 1) -> list[dict[str, Any]]:
    return [spread(skew, ZONE, {"matchLabels": {"app": app}})]


def test_hard_spread_across_zones_and_pending_when_a_zone_is_full() -> None:
    # Two nodes per zone, but zone z1's nodes have one GPU each.
    nodes = [gpu_node("n0", 4, labels={ZONE: "z0"}), gpu_node("n1", 1, labels={ZONE: "z1"}),
             gpu_node("n2", 4, labels={ZONE: "z0"}), gpu_node("n3", 1, labels={ZONE: "z1"})]
    sched, cluster, _ = setup(nodes, CONFIG)
    for i in range(6):
        create(cluster, replica(f"s-{i}", {"app": "s"}, topologySpreadConstraints=hard_zone(
            "s")))
        sched.run_until_idle()
    zones = Counter(zone_of(cluster, f"s-{i}") for i in range(6) if node_of(cluster, f"s-{i}"))
    assert zones == {"z0": 3, "z1": 2}
    pending = [f"s-{i}" for i in range(6) if node_of(cluster, f"s-{i}") is None]
    assert len(pending) == 1
    message = cluster.events(name=pending[0], reason="FailedScheduling")[-1].message
    # Zone z0 is one ahead; zone z1 is even but out of GPUs.
    assert message == ("0/4 nodes are available: 2 insufficient GPU memory, 2 node(s) didn't "
                       "match pod topology spread constraints. preemption: 0/4 nodes are "
                       "available: 4 No preemption victims found for incoming pod.")


def test_soft_spread_across_zones() -> None:
    sched, cluster, _ = setup(zoned_nodes(4), CONFIG)
    soft = [spread(1, ZONE, {"matchLabels": {"app": "w"}}, hard=False)]
    for i in range(6):
        create(cluster, replica(f"w-{i}", {"app": "w"}, topologySpreadConstraints=soft))
        sched.run_until_idle()
    assert Counter(zone_of(cluster, f"w-{i}") for i in range(6)) == {"z0": 3, "z1": 3}


def test_match_label_keys_spread_each_revision_on_its_own() -> None:
    sched, cluster, _ = setup(zoned_nodes(4), CONFIG)
    constraint = [spread(1, ZONE, {"matchLabels": {"app": "r"}},
                         matchLabelKeys=["pod-template-hash"])]
    # Revision 1 sits in zone z0 only (scheduled while z1 was cordoned off by selector).
    create(cluster, *(replica(f"old-{i}", {"app": "r", "pod-template-hash": "1"},
                              nodeSelector={ZONE: "z0"}) for i in range(2)))
    sched.run_until_idle()
    for i in range(2):
        create(cluster, replica(f"new-{i}", {"app": "r", "pod-template-hash": "2"},
                                topologySpreadConstraints=constraint))
        sched.run_until_idle()
    # Counted alone, revision 2 spreads 1/1 although the app as a whole is 3/1.
    assert sorted(zone_of(cluster, f"new-{i}") for i in range(2)) == ["z0", "z1"]


def test_system_default_spread_for_pods_a_service_selects() -> None:
    sched, cluster, _ = setup([gpu_node(f"n{i}", 8) for i in range(3)], CONFIG)
    cluster.create("services", {"metadata": {"name": "web", "namespace": "default"},
                                "spec": {"selector": {"app": "web"}}})
    for i in range(3):
        create(cluster, replica(f"web-{i}", {"app": "web"}))
        sched.run_until_idle()
    # Without the default constraints the bin-packing GPU policy would stack them.
    assert {node_of(cluster, f"web-{i}") for i in range(3)} == {"n0", "n1", "n2"}


def test_anti_affinity_across_namespaces_chosen_by_label() -> None:
    sched, cluster, _ = setup(zoned_nodes(2), CONFIG)
    cluster.create("namespaces", {"metadata": {"name": "prod", "labels": {"env": "prod"}}})
    create(cluster, replica("db", {"app": "db"}, nodeSelector={HOST: "n0"}) | {
        "metadata": {"name": "db", "namespace": "prod", "labels": {"app": "db"}}})
    sched.run_until_idle()
    away = affinity(anti=[term(label_in("app", "db"), HOST,
                               ns_selector={"matchLabels": {"env": "prod"}})])
    create(cluster, *(replica(f"batch-{i}", {"app": "batch"}, affinity=away)
                      for i in range(2)))
    sched.run_until_idle()
    assert {node_of(cluster, f"batch-{i}") for i in range(2)} == {"n1"}
