"""The cache: derived state, assume/forget/confirm/expire, copy-on-write snapshots."""

from __future__ import annotations

import copy

from scheduler.framework.podinfo import parse
from scheduler.framework.snapshot import Snapshot
from scheduler.host.cache import Cache
from scheduler.plugins.vgpu import ASSIGNMENT_KEY
from vgpu import builders, codecs
from vgpu.config import Config
from vgpu.devices import Usage

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
    cache.assume(p, "n1", a)
    assert cache.node_info("n1").usages[0] == Usage(1000, 10, 1)  # type: ignore[union-attr]
    cache.finish_binding(p.key, NOW)
    cache.set_pod(bound("a", "n1", a))  # the watch shows it bound
    rec = cache.pod(p.key)
    assert rec is not None and not rec.assumed
    info = cache.node_info("n1")
    assert info is not None and info.usages[0] == Usage(1000, 10, 1) and info.pod_count == 1
    assert cache.expire(NOW + 1000) == []


def test_forget_and_expire() -> None:
    cache = cache_with("n1")
    p = parse(builders.pod("a"), Config())
    cache.assume(p, "n1", assignment("n1", "GPU-n1-0"))
    assert cache.forget(p.key) is not None
    assert cache.node_info("n1").usages[0] == Usage()  # type: ignore[union-attr]
    cache.assume(p, "n1", assignment("n1", "GPU-n1-0"))
    # no expiry while the binding is still in progress
    assert cache.expire(NOW + 10_000) == []
    cache.finish_binding(p.key, NOW)
    assert cache.expire(NOW + 29) == []
    assert [r.key for r in cache.expire(NOW + 31)] == [p.key]
    assert cache.node_info("n1").usages[0] == Usage()  # type: ignore[union-attr]
    assert cache.pod(p.key) is None


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
    assert ASSIGNMENT_KEY  # the key the binder reads is public


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
