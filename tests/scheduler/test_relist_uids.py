"""Pods deleted and created again under their names while the scheduler's watch was away
(issue 50, case 1): after the watch comes back (resumed, or expired and re-listed), the
cache counts exactly what a scheduler started fresh from one list counts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.e2e_support import gpu_node, setup
from vgpu import builders, codecs
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, PHASE_SUCCESS
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.devices import EMPTY
from vgpu_scheduler.host.scheduler import Scheduler

NODES = ("n0", "n1")
NAMES = tuple(f"p{i}" for i in range(6))


def bound_pod(name: str, node: str, gpu: int, mib: int, *, ended: bool = False) -> Obj:
    """A pod as the watch shows it once a vgpu scheduler bound it and its agent served it."""
    pod = builders.pod(name, [builders.container(gpumem=mib, cores=10, cpu="100m")])
    assignment = codecs.Assignment(node, {"main": (
        codecs.GrantedDevice(f"GPU-{node}-{gpu}", mib, 10),)})
    pod["metadata"]["annotations"].update({ASSIGNMENT: codecs.encode_assignment(assignment),
                                           BIND_PHASE: PHASE_SUCCESS})
    pod["spec"]["nodeName"] = node
    if ended:
        pod["status"] = {"phase": "Succeeded"}
    return pod


def counted(sched: Scheduler) -> dict[str, Any]:
    """What the cache counts on each node: per-GPU usage, CPU, memory, pods by uid."""
    out: dict[str, Any] = {}
    for name in sorted(sched.cache.node_names()):
        info = sched.cache.node_info(name)
        assert info is not None
        out[name] = ({uuid: u for uuid, u in info.gpu_usage.items() if u != EMPTY},
                     info.requested_cpu, info.requested_memory, info.pod_count,
                     sorted(info.pods))
    return out


def fresh(cluster: MemoryCluster) -> dict[str, Any]:
    """What a scheduler that lists the cluster now counts."""
    sched = Scheduler(Config(), cluster)
    sched.pump()
    return counted(sched)


# (operation, pod name, node, gpu, MiB): "put" creates the pod if its name is free, "del"
# deletes it if there, "again" deletes it and creates it again (a StatefulSet's restart),
# "pending" creates it again unbound, "end" marks it Succeeded.
OPS = st.lists(st.tuples(st.sampled_from(("put", "del", "again", "pending", "end")),
                         st.sampled_from(NAMES), st.sampled_from(NODES),
                         st.integers(0, 1), st.sampled_from((1000, 4000, 8000))),
               min_size=1, max_size=25)


def apply(cluster: MemoryCluster, ops: list[tuple[str, str, str, int, int]]) -> None:
    for op, name, node, gpu, mib in ops:
        present = any(p["metadata"]["name"] == name for p in cluster.list("pods").items)
        if op == "put" and not present:
            cluster.create("pods", bound_pod(name, node, gpu, mib))
        elif op == "del" and present:
            cluster.delete("pods", name, "default")
        elif op in ("again", "pending"):
            if present:
                cluster.delete("pods", name, "default")
            cluster.create("pods", bound_pod(name, node, gpu, mib) if op == "again" else
                           builders.pod(name, [builders.container(gpumem=mib, cores=10)]))
        elif op == "end" and present:
            pod = cluster.get("pods", name, "default")
            cluster.replace("pods", {**pod, "status": {"phase": "Succeeded"}})


@settings(max_examples=60, deadline=None)
@given(before=OPS, hidden=OPS, expired=st.booleans())
def test_a_watch_back_from_a_gap_leaves_the_cache_as_a_fresh_list_does(
        before: list[tuple[str, str, str, int, int]],
        hidden: list[tuple[str, str, str, int, int]], expired: bool) -> None:
    # A short history: the gap's writes push the watch's version out of it, a 410.
    cluster = MemoryCluster(history=4 if expired else 100_000)
    sched, cluster, _ = setup([gpu_node(n, 2, memory_mib=16000) for n in NODES],
                              cluster=cluster)
    apply(cluster, before)
    sched.pump()
    assert counted(sched) == fresh(cluster)
    apply(cluster, hidden)  # the watch is away: nothing is pumped meanwhile
    for i in range(6):  # enough writes of another kind to expire the pods' watch
        cluster.create("configmaps", {"metadata": {"name": f"c{i}", "namespace": "x"}})
    sched.pump()
    assert counted(sched) == fresh(cluster)


def test_a_replaced_pod_gives_its_room_to_its_successor_after_a_relist() -> None:
    """The issue's sequence: four GPUs full; four pods deleted and created again (pending)
    behind a 410; the scheduler places the new ones in the room the old ones left."""
    cluster = MemoryCluster(history=8)
    sched, cluster, _ = setup([gpu_node("n", 4, memory_mib=16000)], cluster=cluster)
    c = builders.container
    for i in range(16):
        cluster.create("pods", builders.pod(f"p{i}", [c(gpumem=4000, cores=10)]))
    sched.run_until_idle()
    assert all(p["spec"].get("nodeName") for p in cluster.list("pods").items)
    old = {f"p{i}": cluster.get("pods", f"p{i}", "default")["metadata"]["uid"]
           for i in range(4)}
    for name in old:
        cluster.delete("pods", name, "default")
        cluster.create("pods", builders.pod(name, [c(gpumem=4000, cores=10)]))
    for i in range(10):
        cluster.create("configmaps", {"metadata": {"name": f"c{i}", "namespace": "x"}})
    sched.run_until_idle()
    for uid in old.values():
        assert sched.cache.pod(uid) is None
    pods = cluster.list("pods").items
    assert all(p["spec"].get("nodeName") == "n" for p in pods), [
        p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
    assert counted(sched) == fresh(cluster)


def test_an_update_from_one_uid_to_another_is_the_delete_of_one_and_the_add_of_the_other(
        ) -> None:
    """As kube-scheduler's updatePodInCache, whoever hands the handlers such an update."""
    sched, cluster, _ = setup([gpu_node("n", 1, memory_mib=16000)])
    sched.pump()
    seen: list[tuple[str | None, str | None]] = []
    sched._handlers.on_pod_event(lambda old, new: seen.append(
        (old["metadata"]["uid"] if old else None, new["metadata"]["uid"] if new else None)))
    old = cluster.create("pods", bound_pod("p", "n", 0, 8000))
    sched.on_pod(None, old)
    cluster.delete("pods", "p", "default")
    new = cluster.create("pods", builders.pod("p", [builders.container(gpumem=8000)]))
    sched.on_pod(old, new)
    assert sched.cache.pod(old["metadata"]["uid"]) is None
    info = sched.cache.node_info("n")
    assert info is not None and info.pod_count == 0 and info.usages[0] == EMPTY
    assert seen == [(None, old["metadata"]["uid"]), (old["metadata"]["uid"], None),
                    (None, new["metadata"]["uid"])]
    sched.run_until_idle()
    assert cluster.get("pods", "p", "default")["spec"].get("nodeName") == "n"
