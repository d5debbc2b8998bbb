"""The cache: derived state, assume/forget/confirm/expire, copy-on-write snapshots."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu import builders, codecs
from vgpu.config import Config
from vgpu.devices import Usage
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.pod_records import PodRecord, same_record

NOW = 1_800_000_000.0


def assignment(node: str, uuid: str, memory: int = 1000, cores: int = 10) -> codecs.Assignment:
    return codecs.Assignment(node, {"main": (codecs.GrantedDevice(uuid, memory, cores),)})


def bound(name: str, node: str, a: codecs.Assignment | None, *, cpu: str = "1",
          phase: str | None = "allocating") -> dict[str, object]:
    pod = builders.pod(name, [builders.container(cpu=cpu, memory="1Gi")])
    pod["spec"]["nodeName"] = node
    if a is not None:
        pod["metadata"]["annotations"]["vgpu.io/assignment"] = codecs.encode_assignment(a)
    if phase:
        pod["metadata"]["annotations"]["vgpu.io/bind-phase"] = phase
    return pod


def cache_with(*names: str) -> Cache:
    cache = Cache(assume_ttl=30.0)
    for name in names:
        cache.set_node(builders.node(name, builders.devices(name, 2), cpu="8"), NOW)
    return cache


def test_state_is_derived_from_pods_and_nodes_in_any_order() -> None:
    cache = Cache()
    # pods arrive before their node (informers race)
    cache.set_pod(bound("a", "n1", assignment("n1", "GPU-n1-0")))
    cache.set_pod(bound("b", "n1", None))  # another scheduler's pod
    cache.set_node(builders.node("n1", builders.devices("n1", 2), cpu="8"), NOW)
    info = cache.node_info("n1")
    assert info is not None
    assert (info.requested_cpu, info.pod_count) == (2000, 2)
    assert info.usages == (Usage(1000, 10, 1), Usage())


def test_terminal_and_deleted_pods_free_their_resources() -> None:
    cache = cache_with("n1")
    pod = bound("a", "n1", assignment("n1", "GPU-n1-1"))
    cache.set_pod(pod)
    done = copy.deepcopy(pod)
    done["status"] = {"phase": "Succeeded"}
    before, after = cache.set_pod(done)
    assert before is not None and after is None
    info = cache.node_info("n1")
    assert info is not None and info.usages == (Usage(), Usage()) and info.pod_count == 0
    cache.set_pod(pod)
    assert cache.remove_pod("default/a") is not None
    assert cache.node_info("n1").pod_count == 0  # type: ignore[union-attr]


def test_assume_then_confirm_does_not_double_count() -> None:
    cache = cache_with("n1")
    p = parse(builders.pod("a", [builders.container(cpu="1", memory="1Gi")]), Config())
    a = assignment("n1", "GPU-n1-0")
    assumed = cache.assume(p, "n1", a)
    assert isinstance(assumed, PodRecord)
    assert cache.node_info("n1").usages[0] == Usage(1000, 10, 1)  # type: ignore[union-attr]
    cache.finish_binding(assumed, NOW)
    cache.set_pod(bound("a", "n1", a))  # the watch shows it bound
    rec = cache.pod(p.pod_id)
    assert rec is not None and not rec.assumed
    info = cache.node_info("n1")
    assert info is not None and info.usages[0] == Usage(1000, 10, 1) and info.pod_count == 1
    assert cache.expire(NOW + 1000) == []


def test_forget_and_expire() -> None:
    cache = cache_with("n1")
    p = parse(builders.pod("a"), Config())
    first = cache.assume(p, "n1", assignment("n1", "GPU-n1-0"))
    assert isinstance(first, PodRecord) and cache.forget(first)
    assert not cache.forget(first)  # once
    assert cache.node_info("n1").usages[0] == Usage()  # type: ignore[union-attr]
    second = cache.assume(p, "n1", assignment("n1", "GPU-n1-0"))
    assert isinstance(second, PodRecord)
    # no expiry while the binding is still in progress
    assert cache.expire(NOW + 10_000) == []
    cache.finish_binding(second, NOW)
    assert cache.expire(NOW + 29) == []
    assert [r.pod_id for r in cache.expire(NOW + 31)] == [p.pod_id]
    assert cache.node_info("n1").usages[0] == Usage()  # type: ignore[union-attr]
    assert cache.pod(p.pod_id) is None


def test_snapshot_is_copy_on_write_and_incremental() -> None:
    cache = cache_with("n1", "n2")
    snap = Snapshot()
    assert cache.update_snapshot(snap) == 2
    old_n1, old_n2 = snap.get("n1"), snap.get("n2")
    p = parse(builders.pod("a"), Config())
    cache.assume(p, "n1", assignment("n1", "GPU-n1-0"))
    # the snapshot does not move until it is updated, and old NodeInfos never change
    assert snap.get("n1") is old_n1 and old_n1 is not None and old_n1.usages[0] == Usage()
    assert cache.update_snapshot(snap) == 1
    assert snap.get("n2") is old_n2
    new_n1 = snap.get("n1")
    assert new_n1 is not None and new_n1.usages[0] == Usage(1000, 10, 1)
    assert old_n1.usages[0] == Usage()
    cache.remove_node("n2")
    cache.update_snapshot(snap)
    assert snap.get("n2") is None and len(snap) == 1


def test_node_changes_report_only_what_matters() -> None:
    cache = cache_with("n1")
    node = builders.node("n1", builders.devices("n1", 2), cpu="8", heartbeat=NOW)
    assert cache.set_node(node, NOW) is not None  # heartbeat appeared: fresh now
    refreshed = builders.node("n1", builders.devices("n1", 2), cpu="8", heartbeat=NOW + 30)
    assert cache.set_node(refreshed, NOW + 30) is None  # heartbeat-only refresh
    labelled = builders.node("n1", builders.devices("n1", 2), cpu="8", heartbeat=NOW + 30,
                          labels={"zone": "a"})
    event = cache.set_node(labelled, NOW + 30)
    assert event is not None and event.changes == {"labels"}
    grown = builders.node("n1", builders.devices("n1", 3), cpu="8", heartbeat=NOW + 30,
                       labels={"zone": "a"})
    event = cache.set_node(grown, NOW + 30)
    assert event is not None and event.changes == {"inventory"}


def test_unreadable_inventory_and_assignment_are_tolerated() -> None:
    cache = Cache()
    node = builders.node("n1", builders.devices("n1", 1))
    node["metadata"]["annotations"]["vgpu.io/node-gpus"] = "{broken"
    cache.set_node(node, NOW)
    info = cache.node_info("n1")
    assert info is not None and info.devices == () and info.static.inventory_error
    pod = bound("a", "n1", None)
    pod["metadata"]["annotations"]["vgpu.io/assignment"] = "nope"
    cache.set_pod(pod)
    assert cache.node_info("n1").pod_count == 1  # type: ignore[union-attr]


def test_a_pod_starting_to_terminate_is_seen_on_its_node() -> None:
    # It still takes its resources, but topology spread stops counting it.
    cache = cache_with("n1")
    pod = bound("a", "n1", None)
    cache.set_pod(pod)
    leaving = copy.deepcopy(pod)
    leaving["metadata"]["deletionTimestamp"] = "2027-01-01T00:00:00Z"
    cache.set_pod(leaving)
    info = cache.node_info("n1")
    assert info is not None and info.pod_count == 1
    assert info.pods["default/a"].info.terminating


def _changed(path: str, value: object) -> dict[str, object]:
    pod = copy.deepcopy(bound("p", "n1", assignment("n1", "GPU-n1-0")))
    *parents, last = path.split(".")
    target: dict[str, object] = pod
    for part in parents:
        target = target.setdefault(part, {})  # type: ignore[assignment]
    target[last] = value
    return pod


@pytest.mark.parametrize(("path", "value", "same"), [
    ("metadata.annotations.vgpu.io/bind-phase", "success", True),
    ("metadata.annotations.vgpu.io/allocation", "{}", True),
    ("metadata.resourceVersion", "99", True),
    ("status.conditions", [{"type": "Ready", "status": "True"}], True),
    ("metadata.annotations.vgpu.io/assignment", "{}", False),
    ("metadata.annotations.other", "x", False),
    ("metadata.labels", {"app": "b"}, False),
    ("metadata.deletionTimestamp", "2026-01-01T00:00:00Z", False),
    ("status.phase", "Succeeded", False),
    ("spec.priority", 7, False),
])
def test_same_record(path: str, value: object, same: bool) -> None:
    # An annotation key has dots of its own: split it off before walking the path.
    if path.startswith("metadata.annotations."):
        pod = copy.deepcopy(bound("p", "n1", assignment("n1", "GPU-n1-0")))
        key = path.removeprefix("metadata.annotations.")
        pod["metadata"]["annotations"][key] = value  # type: ignore[index]
    else:
        pod = _changed(path, value)
    assert same_record(bound("p", "n1", assignment("n1", "GPU-n1-0")), pod) is same


def test_an_agent_patch_refreshes_the_record_without_changing_the_node() -> None:
    cache = Cache()
    cache.set_node(builders.node("n1", builders.devices("n1", 1)), NOW)
    cache.set_pod(bound("p", "n1", assignment("n1", "GPU-n1-0")))
    before = cache.node_info("n1")
    old, new = cache.set_pod(bound("p", "n1", assignment("n1", "GPU-n1-0"), phase="success"))
    assert old is not None and new is not None and old.info.shape == new.info.shape
    assert new.obj["metadata"]["annotations"]["vgpu.io/bind-phase"] == "success"
    assert cache.node_info("n1") == before


OPS = st.lists(st.tuples(st.sampled_from(["bind", "delete", "assume", "forget", "read",
                                          "node"]),
                         st.integers(0, 5), st.sampled_from(["n1", "n2"]), st.integers(0, 1)),
               max_size=40)


@given(OPS)
def test_node_state_after_any_changes_is_what_its_pods_add_up_to(ops: list[Any]) -> None:
    # Pod changes are folded into a node's NodeInfo lazily, at its next read: whatever the
    # order of changes and reads, what is read equals the node built from scratch.
    cache = cache_with("n1", "n2")
    snapshot = Snapshot()
    assumed: dict[str, Any] = {}
    for op, i, node, gpu in ops:
        key = f"default/p{i}"
        if op == "bind":
            cache.set_pod(bound(f"p{i}", node, assignment(node, f"GPU-{node}-{gpu}")))
        elif op == "delete":
            cache.remove_pod(key)
        elif op == "assume":
            pod = parse(builders.pod(f"p{i}", [builders.container(cpu="2")]), Config())
            assumed[key] = cache.assume(pod, node, assignment(node, f"GPU-{node}-{gpu}", 500, 5))
        elif op == "forget":
            if isinstance(assumed.get(key), PodRecord):
                cache.forget(assumed[key])
        elif op == "node":
            cache.set_node(builders.node(node, builders.devices(node, 2), cpu=str(8 + i)), NOW)
        else:
            cache.update_snapshot(snapshot)
    for name in ("n1", "n2"):
        info = cache.node_info(name)
        assert info is not None
        fresh = NodeInfo.of(info.static, 1.0, dict(info.pods))
        assert (info.requested_cpu, info.requested_memory, info.pod_count, info.usages) == (
            fresh.requested_cpu, fresh.requested_memory, fresh.pod_count, fresh.usages)
        assert sorted(info.pods) == sorted(
            k for k in (f"default/p{i}" for i in range(6))
            if (rec := cache.pod(k)) is not None and rec.node == name)
    cache.update_snapshot(snapshot)
    assert all(snapshot.get(n) is cache.node_info(n) for n in ("n1", "n2"))


def test_changes_waiting_for_a_node_that_nobody_reads_stay_bounded() -> None:
    # A follower replica applies the watch but reads no NodeInfo until a scrape.
    cache = cache_with("n1")
    for i in range(300):
        cache.set_pod(bound(f"p{i}", "n1", None, cpu="10m"))
        if i % 2:
            cache.remove_pod(f"default/p{i}")
    assert len(cache._pending.get("n1", ())) < 64
    info = cache.node_info("n1")
    assert info is not None and (info.pod_count, info.requested_cpu) == (150, 1500)
