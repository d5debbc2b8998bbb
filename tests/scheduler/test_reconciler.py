"""The cache's reconciler (issue 50): a difference between what the cache counts and the
informers' stores is found, counted and repaired; what is in flight never is one."""

from __future__ import annotations

import copy

import pytest

from tests.scheduler.e2e_support import gpu_node, setup
from tests.scheduler.test_metrics import value
from tests.scheduler.test_relist_uids import bound_pod, counted, fresh
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu.devices import Usage
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.host import reconciler
from vgpu_scheduler.host.metrics import Metrics, State
from vgpu_scheduler.host.pod_records import PodRecord
from vgpu_scheduler.host.scheduler import Scheduler


def started(gpus: int = 2) -> tuple[Scheduler, MemoryCluster]:
    sched, cluster, _ = setup([gpu_node("n", gpus, memory_mib=16000)])
    sched.pump()
    return sched, cluster


def failing_once(monkeypatch: pytest.MonkeyPatch, obj: object, name: str) -> None:
    """``obj.name`` raises on its next call (a handler's bug: the informer logs it and goes
    on, its store ahead of the cache)."""
    real = getattr(obj, name)

    def broken(*args: object, **kwargs: object) -> object:
        monkeypatch.setattr(obj, name, real)
        raise RuntimeError("a handler's bug")

    monkeypatch.setattr(obj, name, broken)


def one_gpu(node: str, gpu: int, mib: int) -> codecs.Assignment:
    return codecs.Assignment(node, {"main": (codecs.GrantedDevice(f"GPU-{node}-{gpu}", mib,
                                                                    0),)})


def kinds(drifts: list[reconciler.Drift]) -> list[str]:
    return sorted(d.kind for d in drifts)


def test_a_pod_the_cache_counts_but_the_store_does_not_hold_gives_its_room_back() -> None:
    sched, cluster, clock = setup([gpu_node("n", 1, memory_mib=16000)])
    sched.pump()
    ghost = bound_pod("ghost", "n", 0, 16000)
    ghost["metadata"]["uid"] = "ghost-uid"
    sched.cache.set_pod(ghost)  # as a handler that missed the pod's deletion leaves it
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=16000)]))
    sched.run_until_idle()
    assert not cluster.get("pods", "p", "default")["spec"].get("nodeName")
    assert kinds(sched.reconcile()) == [reconciler.STALE_POD]
    assert sched.cache.pod("ghost-uid") is None
    # The room it gave back woke the pod that waited for it (after its backoff).
    clock.advance(30)
    sched.run_until_idle()
    assert cluster.get("pods", "p", "default")["spec"].get("nodeName") == "n"
    assert sched.reconcile() == []


def test_a_bound_pod_the_cache_lost_or_holds_an_old_copy_of_is_counted_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sched, cluster = started()
    b = cluster.create("pods", bound_pod("b", "n", 1, 8000))
    sched.pump()
    failing_once(monkeypatch, sched.cache, "set_pod")
    cluster.create("pods", bound_pod("a", "n", 0, 4000))
    sched.pump()
    failing_once(monkeypatch, sched.cache, "set_pod")
    labelled = cluster.replace("pods", {**b, "metadata": {**b["metadata"],
                                                          "labels": {"app": "x"}}})
    sched.pump()
    assert counted(sched) != fresh(cluster)
    assert kinds(sched.reconcile()) == [reconciler.MISSING_POD, reconciler.OUTDATED_POD]
    assert counted(sched) == fresh(cluster)
    rec = sched.cache.pod(labelled["metadata"]["uid"])
    assert rec is not None and rec.info.labels == {"app": "x"}


def test_nodes_and_a_nodes_totals_that_drifted_are_recounted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sched, cluster = started()
    cluster.create("pods", bound_pod("a", "n", 0, 4000))
    sched.pump()
    cache = sched.cache
    cache.set_node(gpu_node("extra", 1), 0.0)  # a node the store never held
    failing_once(monkeypatch, cache, "set_node")
    cluster.create("nodes", gpu_node("late", 1))  # stored, never handled
    sched.pump()
    info = cache.node_info("n")
    assert info is not None
    # Totals no longer what the node's pods add up to (a bug in the incremental count).
    cache._infos["n"] = info.replace(gpu_usage={}, requested_cpu=0)
    drifts = sched.reconcile()
    assert kinds(drifts) == [reconciler.MISSING_NODE, reconciler.NODE_TOTALS,
                             reconciler.STALE_NODE]
    assert sorted(cache.node_names()) == ["late", "n"]
    assert counted(sched) == fresh(cluster)
    after = cache.node_info("n")
    assert after is not None and after.usages[0] == Usage(4000, 10, 1)


def test_what_is_in_flight_is_never_drift() -> None:
    sched, cluster = started(4)
    now = sched.cache
    pods = [cluster.create("pods", builders.pod(n, [builders.container(gpumem=2000)]))
            for n in ("assumed", "in-doubt", "nominated")]
    sched.pump()
    infos = [parse(p, Config()) for p in pods]
    kept = []
    for info, gpu in zip(infos[:2], (0, 1), strict=True):
        rec = now.assume(info, "n", one_gpu("n", gpu, 2000))
        assert isinstance(rec, PodRecord)
        kept.append(rec)
    now.finish_binding(kept[0], 0.0)
    assert now.hold_in_doubt(kept[1], 0.0, 30.0)
    now.nominate(infos[2], "n", one_gpu("n", 2, 2000))
    before = counted(sched)
    assert sched.reconcile() == []
    assert counted(sched) == before
    assert {r.pod_id for r in now.records()} == {i.pod_id for i in infos}


def test_a_pod_the_watch_changed_since_the_reading_is_not_repaired_from_it() -> None:
    sched, cluster = started()
    a = cluster.create("pods", bound_pod("a", "n", 0, 4000))
    stale_view = {"default/a": copy.deepcopy(a)}
    pods = sched.informers()[1]
    real_snapshot = pods.snapshot
    pods.snapshot = lambda: stale_view  # type: ignore[method-assign]
    try:
        # The reading shows "a" bound, the cache has not seen it: a suspect; meanwhile the
        # watch shows it created and deleted, so by the check there is nothing to repair.
        cluster.delete("pods", "a", "default")
        sched.pump()
        assert sched.reconcile() == []
    finally:
        pods.snapshot = real_snapshot  # type: ignore[method-assign]
    assert counted(sched) == fresh(cluster)


def test_a_relist_runs_a_round_and_the_metric_counts_what_it_repaired() -> None:
    cluster = MemoryCluster(history=4)
    sched, cluster, _ = setup([gpu_node("n", 1, memory_mib=16000)], cluster=cluster)
    metrics = Metrics(sched, State(leading=lambda: True))
    sched.pump()
    ghost = bound_pod("ghost", "n", 0, 16000)
    ghost["metadata"]["uid"] = "ghost-uid"
    sched.cache.set_pod(ghost)
    rounds = sched.reconciler.rounds
    for i in range(6):  # the pods' watch expires: a re-list
        cluster.create("pods", builders.pod(f"x{i}", [builders.container(gpus=None)],
                                            scheduler_name="other"))
    sched.pump()
    assert sched.reconciler.rounds > rounds
    assert sched.cache.pod("ghost-uid") is None
    assert value(metrics, "vgpu_scheduler_cache_drift_total", kind="stale-pod") == 1.0
    assert value(metrics, "vgpu_scheduler_cache_drift_total", kind="missing-pod") == 0.0


@pytest.mark.parametrize("synced", [False, True])
def test_nothing_is_compared_before_every_store_has_listed(synced: bool) -> None:
    sched, _, _ = setup([gpu_node("n", 1)])
    if synced:
        sched.pump()
    ghost = bound_pod("ghost", "n", 0, 1000)
    sched.cache.set_pod(ghost)
    assert kinds(sched.reconcile()) == ([reconciler.STALE_POD] if synced else [])
