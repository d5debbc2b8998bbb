from __future__ import annotations

import threading

import pytest

from vgpu.cluster.informer import Informer
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj, Selector
from vgpu.errors import ConflictError, GoneError, NotFoundError


def pod(name: str, ns: str = "default", node: str | None = None) -> Obj:
    spec: dict[str, object] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def node(name: str) -> Obj:
    return {"metadata": {"name": name}}


def test_create_get_and_resource_versions_increase() -> None:
    c = MemoryCluster()
    a = c.create("pods", pod("a"))
    b = c.create("pods", pod("b"))
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    assert c.get("pods", "a", "default")["metadata"]["uid"] == a["metadata"]["uid"]
    with pytest.raises(ConflictError, match="already exists"):
        c.create("pods", pod("a"))
    with pytest.raises(NotFoundError):
        c.get("pods", "zz", "default")


def test_generate_name_gives_a_unique_name() -> None:
    c = MemoryCluster()
    obj = {"metadata": {"generateName": "web-", "namespace": "x"}, "spec": {}}
    first, second = c.create("pods", obj), c.create("pods", obj)
    assert first["metadata"]["name"].startswith("web-")
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_returned_objects_are_copies() -> None:
    c = MemoryCluster()
    got = c.create("nodes", node("n1"))
    got["metadata"]["name"] = "changed"
    assert c.get("nodes", "n1")["metadata"]["name"] == "n1"


def test_conditional_patch_conflicts_on_stale_version() -> None:
    c = MemoryCluster()
    created = c.create("nodes", node("n1"))
    rv = created["metadata"]["resourceVersion"]
    c.patch_annotations("nodes", "n1", {"a": "1"}, resource_version=rv)
    with pytest.raises(ConflictError, match="modified"):
        c.patch_annotations("nodes", "n1", {"a": "2"}, resource_version=rv)
    patched = c.patch_annotations("nodes", "n1", {"a": None, "b": "2"})
    assert patched["metadata"]["annotations"] == {"b": "2"}


def test_bind_sets_node_and_annotations_in_one_write_and_only_once() -> None:
    c = MemoryCluster()
    c.create("pods", pod("p"))
    before = int(c.resource_version)
    c.bind("default", "p", "n1", {"vgpu.io/bind-phase": "allocating"})
    got = c.get("pods", "p", "default")
    assert got["spec"]["nodeName"] == "n1"
    assert got["metadata"]["annotations"]["vgpu.io/bind-phase"] == "allocating"
    assert int(c.resource_version) == before + 1
    with pytest.raises(ConflictError, match="already assigned"):
        c.bind("default", "p", "n2", {})


def test_watch_resumes_and_field_selector_reports_enter_and_leave() -> None:
    c = MemoryCluster()
    start = c.resource_version
    c.create("pods", pod("p"))
    c.bind("default", "p", "n1", {})
    c.delete("pods", "p", "default")
    on_node = [(e.type, e.object["metadata"]["name"])
               for e in c.watch("pods", start, Selector(node_name="n1"), timeout_seconds=0)]
    assert on_node == [("ADDED", "p"), ("DELETED", "p")]
    everything = [e.type for e in c.watch("pods", start, timeout_seconds=0)]
    assert everything == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_from_a_compacted_version_is_gone() -> None:
    c = MemoryCluster(history=2)
    for i in range(5):
        c.create("nodes", node(f"n{i}"))
    with pytest.raises(GoneError):
        list(c.watch("nodes", "1", timeout_seconds=0))


def test_informer_relists_after_gone_without_double_applying() -> None:
    c = MemoryCluster(history=3)
    seen: list[tuple[str | None, str | None]] = []

    def handler(old: Obj | None, new: Obj | None) -> None:
        seen.append((old["metadata"]["name"] if old else None,
                     new["metadata"]["name"] if new else None))

    c.create("nodes", node("keep"))
    c.create("nodes", node("drop"))
    informer = Informer(c, "nodes", handler)
    informer.pump()
    assert sorted(seen) == [(None, "drop"), (None, "keep")]
    seen.clear()
    c.delete("nodes", "drop")
    for i in range(5):  # push the informer's version out of the history
        c.create("nodes", node(f"x{i}"))
    informer.pump()
    assert ("drop", None) in seen
    assert sorted(k for k in (i["metadata"]["name"] for i in informer.items())) == [
        "keep", "x0", "x1", "x2", "x3", "x4"]
    seen.clear()
    informer.pump()  # nothing new: nothing applied twice
    assert seen == []


def test_informer_thread_sees_changes_promptly() -> None:
    c = MemoryCluster()
    got = threading.Event()
    informer = Informer(c, "pods", lambda old, new: got.set() if new else None,
                        watch_timeout=0.2)
    stop = threading.Event()
    thread = informer.start(stop)
    try:
        assert informer.synced.wait(2)
        c.create("pods", pod("late"))
        assert got.wait(2)
    finally:
        stop.set()
        thread.join(2)
    assert not thread.is_alive()
