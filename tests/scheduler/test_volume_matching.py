"""Which PV a claim gets, where a class provisions, and how storage objects parse: the
pure functions under VolumeBinding (kube's FindMatchingVolume, CheckNodeAffinity,
MatchTopologySelectorTerms and GetBindVolumeToClaim cases, in our words)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import volumes as vol
from vgpu_scheduler.plugins.helper.volume_objects import (
    BOUND_BY_CONTROLLER,
    parse_claim,
    parse_csinode,
    parse_storage_class,
    parse_volume,
)
from vgpu_scheduler.plugins.kube.volume_binding.matching import (
    affinity_matches,
    bind_volume_to_claim,
    find_matching_volume,
    topology_allows,
)

NODE = {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "a"}


def claim(**kw: Any) -> Any:
    obj = vol.pvc("data", "fast", **kw)
    obj["metadata"]["uid"] = "uid-data"
    return parse_claim(obj)


def volume(name: str, **kw: Any) -> Any:
    kw.setdefault("capacity", "1Gi")
    return parse_volume(vol.pv(name, kw.pop("cls", "fast"), **kw))


def ref(name: str = "data", uid: str = "") -> dict[str, Any]:
    return {"claimRef": {"namespace": "default", "name": name, "uid": uid}}


@pytest.mark.parametrize(("claim_kw", "volumes", "want"), [
    pytest.param({}, [volume("a")], "a", id="exact-fit"),
    pytest.param({}, [volume("big", capacity="5Gi"), volume("small", capacity="2Gi"),
                      volume("mid", capacity="3Gi")], "small", id="smallest-fit"),
    pytest.param({"request": "2Gi"}, [volume("a")], None, id="too-small"),
    pytest.param({}, [volume("a", cls="slow")], None, id="other-class"),
    pytest.param({}, [volume("a", phase="Released"), volume("b", phase="Pending")], None,
                 id="not-available"),
    pytest.param({}, [volume("a", **ref("other"))], None, id="bound-to-another-claim"),
    pytest.param({}, [volume("a", **ref("data", "uid-old"))], None,
                 id="bound-to-an-earlier-claim-of-that-name"),
    pytest.param({}, [volume("big", capacity="9Gi", phase="Bound", **ref()), volume("a")],
                 "big", id="pre-bound-wins-over-smaller"),
    pytest.param({}, [volume("pre", on={"kubernetes.io/hostname": ["n2"]}, **ref()),
                      volume("a")], None, id="pre-bound-elsewhere-rules-node-out"),
    pytest.param({}, [volume("a", volume_mode="Block")], None, id="volume-mode"),
    pytest.param({"volumeMode": "Block"}, [volume("a", volume_mode="Block")], "a",
                 id="block-for-block"),
    pytest.param({"modes": ["ReadWriteMany"]}, [volume("a")], None, id="access-mode-missing"),
    pytest.param({}, [volume("a", modes=["ReadOnlyMany", "ReadWriteOnce"])], "a",
                 id="access-modes-superset"),
    pytest.param({"selector": {"matchLabels": {"tier": "gold"}}},
                 [volume("plain"), volume("gold", labels={"tier": "gold"})], "gold",
                 id="selector"),
    pytest.param({}, [volume("a", on={"kubernetes.io/hostname": ["n2"]}),
                      volume("b", capacity="2Gi", on={"topology.kubernetes.io/zone": ["a"]})],
                 "b", id="node-affinity"),
])
def test_find_matching_volume(claim_kw: dict[str, Any], volumes: list[Any],
                              want: str | None) -> None:
    found = find_matching_volume(claim(**claim_kw), volumes, NODE)
    assert (found.name if found else None) == want


def test_deleting_excluded_and_malformed_volumes_never_match() -> None:
    deleting = vol.pv("gone", "fast", capacity="1Gi")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    broken = vol.pv("broken", "fast", capacity="1Gi")
    broken["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}
    candidates = [parse_volume(deleting), parse_volume(broken), volume("taken")]
    assert find_matching_volume(claim(), candidates, NODE, excluded=["taken"]) is None
    assert "Near" in (parse_volume(broken).error or "")


@pytest.mark.parametrize(("affinity", "matches"), [
    (None, True),
    ({"kubernetes.io/hostname": ["n1"]}, True),
    ({"kubernetes.io/hostname": ["n2"]}, False),
    ({"topology.kubernetes.io/zone": ["a", "b"], "kubernetes.io/hostname": ["n1"]}, True),
    ({"topology.kubernetes.io/zone": ["b"], "kubernetes.io/hostname": ["n1"]}, False),
])
def test_volume_node_affinity(affinity: dict[str, list[str]] | None, matches: bool) -> None:
    assert affinity_matches(volume("a", on=affinity), NODE) is matches


def test_affinity_on_the_node_name_field_matches_no_node() -> None:
    # As kube's CheckNodeAffinity: the terms are evaluated on the node's labels only.
    obj = vol.pv("a", "fast")
    obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}
    assert not affinity_matches(parse_volume(obj), NODE)


@pytest.mark.parametrize(("topologies", "allowed"), [
    ([], True),
    ([{"topology.kubernetes.io/zone": ["a"]}], True),
    ([{"topology.kubernetes.io/zone": ["b", "c"]}], False),
    ([{"topology.kubernetes.io/zone": ["b"]}, {"kubernetes.io/hostname": ["n1"]}], True),
    ([{"topology.kubernetes.io/zone": ["a"], "kubernetes.io/hostname": ["n2"]}], False),
    ([{"topology.kubernetes.io/zone": []}], False),
    ([{"missing-label": ["x"]}], False),
])
def test_class_topology(topologies: list[dict[str, list[str]]], allowed: bool) -> None:
    cls = parse_storage_class(vol.storage_class("c", topologies=topologies))
    assert topology_allows(cls, NODE) is allowed


def test_an_empty_topology_term_allows_nothing() -> None:
    raw = vol.storage_class("c")
    raw["allowedTopologies"] = [{"matchLabelExpressions": []}]
    assert not topology_allows(parse_storage_class(raw), NODE)


def test_binding_a_free_volume_sets_the_claim_and_marks_it_ours() -> None:
    raw, dirty = bind_volume_to_claim(volume("a"), claim())
    assert dirty
    assert raw["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
        "name": "data", "uid": "uid-data", "resourceVersion": ""}
    assert raw["metadata"]["annotations"][BOUND_BY_CONTROLLER] == "yes"


def test_binding_a_volume_its_author_pre_bound_keeps_it_theirs() -> None:
    raw, dirty = bind_volume_to_claim(volume("a", **ref()), claim())
    assert dirty and raw["spec"]["claimRef"]["uid"] == "uid-data"
    assert BOUND_BY_CONTROLLER not in raw["metadata"]["annotations"]
    again, dirty = bind_volume_to_claim(parse_volume(raw), claim())
    assert not dirty and again == raw


def test_objects_parse_into_the_fields_the_plugins_read() -> None:
    raw = vol.pvc("data", "fast", request="1500Mi", annotations={
        "volume.beta.kubernetes.io/storage-class": "legacy"})
    parsed = parse_claim(raw)
    assert parsed.storage_class == "legacy"  # the beta annotation wins, as in kube
    assert parsed.request == 1500 * 2**20 and parsed.volume_mode == "Filesystem"
    assert parse_claim(vol.pvc("x", request="lots")).error is not None
    node = parse_csinode({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "a.csi", "allocatable": {"count": 3}}, {"name": "b.csi"}]}})
    assert node.limits == {"a.csi": 3}
    bad = parse_csinode({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "a.csi", "allocatable": {"count": "three"}}]}})
    assert bad.error is not None and bad.limits == {}
    assert parse_storage_class(vol.storage_class("c", mode=None)).binding_mode is None
