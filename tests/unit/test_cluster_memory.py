from __future__ import annotations

import threading

import pytest

from vgpu.cluster.informer import Informer, by_uid
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Kind, Obj, Selector
from vgpu.cluster.resources import RESOURCES
from vgpu.errors import ConflictError, GoneError, InvalidError, NotFoundError


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


@pytest.mark.parametrize("checks_uid", [True, False], ids=["1.23 on", "1.20-1.22"])
def test_writes_that_name_a_uid_are_for_that_pod_only(checks_uid: bool) -> None:
    c = MemoryCluster(binding_checks_uid=checks_uid)
    old = c.create("pods", pod("p"))["metadata"]["uid"]
    c.delete("pods", "p", "default")
    new = c.create("pods", pod("p"))["metadata"]["uid"]
    # An eviction (preconditions.uid) and a patch (metadata.uid) for the old pod: refused.
    with pytest.raises(ConflictError, match="UID in the precondition"):
        c.evict("default", "p", uid=old)
    with pytest.raises(ConflictError, match="UID in the precondition"):
        c.patch_annotations("pods", "p", {"a": "1"}, "default", uid=old)
    # A Binding (metadata.uid): refused by servers that check it, applied by older ones.
    if checks_uid:
        with pytest.raises(ConflictError, match="UID in the precondition"):
            c.bind("default", "p", "n1", {}, uid=old)
        assert "nodeName" not in c.get("pods", "p", "default")["spec"]
    else:
        c.bind("default", "p", "n1", {}, uid=old)
        assert c.get("pods", "p", "default")["spec"]["nodeName"] == "n1"
    c.patch_annotations("pods", "p", {"a": "1"}, "default", uid=new)
    c.evict("default", "p", uid=new)
    with pytest.raises(NotFoundError):
        c.get("pods", "p", "default")


def test_a_pod_being_deleted_is_not_bound() -> None:
    c = MemoryCluster()
    obj = c.create("pods", pod("p"))
    obj["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    c.replace("pods", obj)
    with pytest.raises(ConflictError, match="being deleted"):
        c.bind("default", "p", "n1", {})


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


# --- every resource of the table ---------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(RESOURCES))
def test_every_resource_is_stored_listed_watched_and_written(kind: Kind) -> None:
    c = MemoryCluster()
    namespaced = RESOURCES[kind].namespaced
    ns = "ns" if namespaced else None
    start = c.resource_version
    created = c.create(kind, {"metadata": {"name": "x", "namespace": ns}, "spec": {"a": 1}})
    assert created["metadata"].get("namespace") == ns
    assert c.get(kind, "x", ns)["spec"] == {"a": 1}
    assert [o["metadata"]["name"] for o in c.list(kind).items] == ["x"]
    stale = created["metadata"]["resourceVersion"]
    replaced = c.replace(kind, {**created, "spec": {"a": 2}})
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(ConflictError, match="modified"):
        c.replace(kind, {**created, "spec": {"a": 3}})
    with pytest.raises(ConflictError, match="modified"):
        c.patch_annotations(kind, "x", {"k": "v"}, ns, resource_version=stale)
    c.patch_annotations(kind, "x", {"k": "v"}, ns)
    c.delete(kind, "x", ns)
    with pytest.raises(NotFoundError, match=f"{RESOURCES[kind].singular} .*x not found"):
        c.get(kind, "x", ns)
    events = [e.type for e in c.watch(kind, start, timeout_seconds=0)]
    assert events == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    # Another kind's history is its own.
    other: Kind = "nodes" if kind != "nodes" else "pods"
    assert list(c.watch(other, start, timeout_seconds=0)) == []


def test_namespaced_objects_default_and_cluster_scoped_have_none() -> None:
    c = MemoryCluster()
    lease = c.create("leases", {"metadata": {"name": "l"}})
    assert lease["metadata"]["namespace"] == "default"
    assert c.get("leases", "l")["metadata"]["name"] == "l"
    sc = c.create("storageclasses", {"metadata": {"name": "fast", "namespace": "x"}})
    assert "namespace" not in sc["metadata"]
    assert c.get("storageclasses", "fast", "anything")["metadata"]["name"] == "fast"
    # A replace that names no namespace is of the object in the default namespace.
    c.replace("leases", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    assert [o["spec"] for o in c.list("leases").items] == [{"holderIdentity": "a"}]


def test_a_namespace_selects_namespaced_resources() -> None:
    c = MemoryCluster()
    for ns in ("a", "b"):
        c.create("persistentvolumeclaims", {"metadata": {"name": "claim", "namespace": ns}})
    listed = c.list("persistentvolumeclaims", Selector(namespace="b")).items
    assert [o["metadata"]["namespace"] for o in listed] == ["b"]
    watched = list(c.watch("persistentvolumeclaims", "0", Selector(namespace="a"),
                           timeout_seconds=0))
    assert [e.object["metadata"]["namespace"] for e in watched] == ["a"]


@pytest.mark.parametrize(("kind", "selector", "message"), [
    ("nodes", Selector(namespace="ns"), "cluster-scoped"),
    ("csinodes", Selector(namespace="ns"), "cluster-scoped"),
    ("persistentvolumeclaims", Selector(node_name="n1"), "pods only"),
])
def test_a_selector_that_cannot_apply_is_refused(kind: Kind, selector: Selector,
                                                 message: str) -> None:
    c = MemoryCluster()
    with pytest.raises(InvalidError, match=message):
        c.list(kind, selector)
    with pytest.raises(InvalidError, match=message):
        c.watch(kind, "0", selector)


def test_replace_needs_a_name() -> None:
    with pytest.raises(InvalidError, match=r"no metadata\.name"):
        MemoryCluster().replace("secrets", {"metadata": {"namespace": "ns"}})


def test_informer_relist_reports_an_object_replaced_in_the_gap_as_delete_then_add() -> None:
    c = MemoryCluster(history=2)
    seen: list[tuple[str | None, str | None]] = []
    relists: list[int] = []
    informer = Informer(c, "pods", lambda old, new: seen.append(
        (old["metadata"]["uid"] if old else None, new["metadata"]["uid"] if new else None)))
    informer.on_relist(lambda: relists.append(len(seen)))
    first = c.create("pods", pod("a"))
    informer.pump()
    assert relists == []  # the first list is no re-list
    c.delete("pods", "a", "default")
    second = c.create("pods", pod("a"))
    for i in range(3):  # push the informer's version out of the history: a 410
        c.create("nodes", node(f"x{i}"))
    seen.clear()
    informer.pump()
    old, new = first["metadata"]["uid"], second["metadata"]["uid"]
    assert seen == [(old, None), (None, new)]
    assert relists == [2]
    assert informer.get("default/a")["metadata"]["uid"] == new  # type: ignore[index]


def test_informer_event_from_one_uid_to_another_is_told_as_delete_then_add() -> None:
    c = MemoryCluster()
    seen: list[tuple[str | None, str | None]] = []
    informer = Informer(c, "pods", lambda old, new: seen.append(
        (old["metadata"]["uid"] if old else None, new["metadata"]["uid"] if new else None)))
    informer.pump()
    informer.apply("ADDED", {**pod("a"), "metadata": {"name": "a", "namespace": "default",
                                                      "uid": "u1", "resourceVersion": "5"}})
    informer.apply("MODIFIED", {**pod("a"), "metadata": {"name": "a", "namespace": "default",
                                                         "uid": "u2", "resourceVersion": "7"}})
    assert seen == [(None, "u1"), ("u1", None), (None, "u2")]


def test_by_uid_splits_only_updates_whose_uid_changed() -> None:
    seen: list[tuple[str | None, str | None]] = []
    handler = by_uid(lambda old, new: seen.append(
        (old["metadata"].get("uid") if old else None,
         new["metadata"].get("uid") if new else None)))
    a1, a2 = {"metadata": {"uid": "1"}}, {"metadata": {"uid": "2"}}
    handler(a1, a2)
    handler(a1, a1)
    handler(None, a1)
    handler({"metadata": {}}, a1)  # no uid to tell them apart by: the same object
    assert seen == [("1", None), (None, "2"), ("1", "1"), (None, "1"), (None, "1")]
