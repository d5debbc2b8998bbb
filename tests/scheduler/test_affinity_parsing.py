"""Parsing what the two plugins read, once per pod: pod (anti-)affinity terms, topology
spread constraints, label selector syntax, and the plugins' settings. A malformed pod is
the pod's ``error`` (kube-scheduler: "parsing pod: ..."), never an exception."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.affinity_support import (
    affinity,
    exists,
    label_in,
    pod,
    pod_obj,
    spread,
    term,
    weighted,
)
from vgpu.config import Config, PodTopologySpreadArgs, from_mapping
from vgpu.errors import ConfigError, RequestError
from vgpu.labels import (
    LabelRequirement,
    LabelSelector,
    parse_selector,
    valid_key,
    valid_value,
)
from vgpu_scheduler.framework.affinity import AffinityTerm, PodAffinity, WeightedTerm
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.spread import SpreadConstraint


def test_terms_default_to_the_pods_namespace_and_resolve_selectors() -> None:
    got = pod("p", namespace="ns1", aff=affinity(
        required=[term(exists("a"), "zone")],
        preferred_anti=[weighted(7, term(exists("b"), "host", ns_selector={
            "matchLabels": {"team": "x"}}))])).pod_affinity
    a, b = LabelSelector((LabelRequirement("a", "Exists"),)), LabelSelector((
        LabelRequirement("b", "Exists"),))
    team = LabelSelector((LabelRequirement("team", "In", frozenset({"x"})),))
    assert got == PodAffinity(
        required=(AffinityTerm(a, frozenset({"ns1"}), None, "zone"),),
        preferred_anti=(WeightedTerm(7, AffinityTerm(b, frozenset(), team, "host")),))
    resolved = got.preferred_anti[0].term.resolve([("t1", {"team": "x"}), ("t2", {})])
    assert (resolved.namespaces, resolved.namespace_selector) == (frozenset({"t1"}), None)
    assert got.uses_namespace_selector and got.topology_keys == {"zone", "host"}


def test_a_pod_without_pod_terms_has_none() -> None:
    assert pod("p").pod_affinity is None
    node_only = pod("p", affinity={"nodeAffinity": {}, "podAffinity": {}}).pod_affinity
    assert node_only is None


@pytest.mark.parametrize(("selector", "namespace", "labels", "ns_labels", "matches"), [
    (None, "default", {"a": "1"}, {}, False),  # a term without labelSelector selects no pod
    ({}, "default", {"a": "1"}, {}, True),
    ({}, "other", {}, {}, False),  # only the pod's own namespace by default
])
def test_term_matching(selector: Any, namespace: str, labels: dict[str, str],
                       ns_labels: dict[str, str], matches: bool) -> None:
    t = pod("p", aff=affinity(required=[term(selector, "zone")])).pod_affinity
    assert t is not None
    assert t.required[0].matches(namespace, labels, ns_labels) is matches


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda s: s["affinity"]["podAffinity"].update(
        requiredDuringSchedulingIgnoredDuringExecution="x"), "must be a list"),
    (lambda s: s["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
     .append({"labelSelector": label_in("k", "bad value")}), "invalid label value"),
    (lambda s: s["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
     .append({"labelSelector": exists("-bad")}), "invalid label key"),
    (lambda s: s["affinity"].update(podAntiAffinity={
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0}]}), "weight"),
    (lambda s: s.update(topologySpreadConstraints=[spread(0, "zone", {})]), "maxSkew"),
    (lambda s: s.update(topologySpreadConstraints=[spread(1, "", {})]), "topologyKey"),
    (lambda s: s.update(topologySpreadConstraints=[{**spread(1, "z", {}),
                                                    "whenUnsatisfiable": "Maybe"}]),
     "whenUnsatisfiable"),
    (lambda s: s.update(topologySpreadConstraints=[spread(1, "z", {}, minDomains=0)]),
     "minDomains"),
    (lambda s: s.update(topologySpreadConstraints=[spread(1, "z", {}, nodeTaintsPolicy="No")]),
     "nodeTaintsPolicy"),
    (lambda s: s.update(topologySpreadConstraints=[spread(1, "z", {}, matchLabelKeys=[3])]),
     "matchLabelKeys"),
])
def test_malformed_terms_are_the_pods_error(mutate: Any, message: str) -> None:
    obj = pod_obj("p", aff=affinity(required=[term(exists("a"), "zone")]))
    mutate(obj["spec"])
    info = parse(obj, Config())
    assert info.error is not None and message in info.error


def test_spread_constraints_take_kubes_defaults_and_match_label_keys() -> None:
    got = pod("p", {"app": "a", "rev": "2"}, constraints=[
        spread(2, "zone", exists("app"), matchLabelKeys=["rev", "missing"]),
        spread(1, "host", None, hard=False, matchLabelKeys=["rev"])]).spread
    app = LabelRequirement("app", "Exists")
    assert got == (
        SpreadConstraint(2, "zone", "DoNotSchedule", LabelSelector((
            LabelRequirement("rev", "In", frozenset({"2"})), app))),
        SpreadConstraint(1, "host", "ScheduleAnyway", None))
    assert got[0].min_domains == 1
    assert (got[0].node_affinity_policy, got[0].node_taints_policy) == ("Honor", "Ignore")


@pytest.mark.parametrize(("key", "ok"), [
    ("app", True), ("kubernetes.io/hostname", True), ("a.b-c_d", True), ("x" * 63, True),
    ("x" * 64, False), ("-a", False), ("a/b/c", False), ("/a", False), ("UPPER.io/a", False),
    ("", False), ("a b", False),
])
def test_label_keys(key: str, ok: bool) -> None:
    assert valid_key(key) is ok


@pytest.mark.parametrize(("value", "ok"), [
    ("", True), ("a", True), ("My_value-1.2", True), ("{{.bad-value.}}", False),
    ("-a", False), ("a" * 64, False),
])
def test_label_values(value: str, ok: bool) -> None:
    assert valid_value(value) is ok


def test_match_labels_are_checked_too() -> None:
    with pytest.raises(RequestError, match="invalid label value"):
        parse_selector({"matchLabels": {"app": "a b"}}, "s")


@pytest.mark.parametrize(("args", "message"), [
    ({"defaultingType": "System", "defaultConstraints": ["zone:1:DoNotSchedule"]},
     "must be empty when defaultingType is System"),
    ({"defaultingType": "List", "defaultConstraints": ["zone:0:DoNotSchedule"]}, "maxSkew"),
    ({"defaultingType": "List", "defaultConstraints": ["zone:1:Never"]}, "whenUnsatisfiable"),
    ({"defaultingType": "List", "defaultConstraints": ["bad key:1:DoNotSchedule"]},
     "not a label key"),
    ({"defaultingType": "List", "defaultConstraints": ["zone:1"]},
     "topologyKey:maxSkew:whenUnsatisfiable"),
    ({"defaultingType": "List", "defaultConstraints": ["z:1:DoNotSchedule",
                                                       "z:2:DoNotSchedule"]}, "two constraints"),
    ({"defaultingType": "Sometimes"}, "not allowed"),
])
def test_bad_spread_defaults_are_config_errors(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping({"scheduler": {"podTopologySpread": args}})


def test_spread_defaults_and_affinity_args_load_from_file_and_env() -> None:
    config = from_mapping(
        {"scheduler": {"podTopologySpread": {"defaultingType": "List"},
                       "interPodAffinity": {"hardPodAffinityWeight": 5}}},
        {"VGPU_SCHEDULER__POD_TOPOLOGY_SPREAD__DEFAULT_CONSTRAINTS":
            "zone:1:DoNotSchedule,host:2:ScheduleAnyway"})
    assert [(c.topology_key, c.max_skew) for c in
            config.scheduler.pod_topology_spread.constraints()] == [("zone", 1), ("host", 2)]
    assert config.scheduler.inter_pod_affinity.hard_pod_affinity_weight == 5
    assert len(PodTopologySpreadArgs().constraints()) == 2  # System: kube's two
    with pytest.raises(ConfigError, match="at most 100"):
        from_mapping({"scheduler": {"interPodAffinity": {"hardPodAffinityWeight": 101}}})
