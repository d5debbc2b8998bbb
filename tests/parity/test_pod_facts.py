"""The pod facts kube-scheduler's plugins read, parsed once (labels, host ports, sidecar
requests, gates, claims, preferred node affinity), and the label selector semantics."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu import builders
from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu.labels import LabelRequirement, LabelSelector, parse_selector
from vgpu_scheduler.framework.compute import Requests, pod_requests
from vgpu_scheduler.framework.host_ports import HostPort, conflicting, parse_host_ports
from vgpu_scheduler.framework.objects import Requirement, SelectorTerm
from vgpu_scheduler.framework.podinfo import parse

APP = {"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
GIB = 1024 ** 3


def ctr(name: str, cpu: str, *, sidecar: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": {"requests": {"cpu": cpu,
                                                                      "memory": "1Gi"}}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


@pytest.mark.parametrize(("init", "cpu", "memory"), [
    ([], 1000, GIB),
    # A plain init container runs alone: the larger of it and the app containers.
    ([ctr("i", "3")], 3000, GIB),
    # A sidecar runs beside the app containers: it adds.
    ([ctr("s", "2", sidecar=True)], 3000, 2 * GIB),
    # An init container after a sidecar runs beside that sidecar: 2 + 3 = 5 > 1 + 2.
    ([ctr("s", "2", sidecar=True), ctr("i", "3")], 5000, 2 * GIB),
    # ...but one before it does not: max(3, 1 + 2) = 3.
    ([ctr("i", "3"), ctr("s", "2", sidecar=True)], 3000, 2 * GIB),
    ([ctr("s1", "1", sidecar=True), ctr("s2", "1", sidecar=True)], 3000, 3 * GIB),
])
def test_requests_count_sidecars_beside_the_app(init: list[dict[str, Any]], cpu: int,
                                                memory: int) -> None:
    pod = {"spec": {"containers": [APP], "initContainers": init}}
    assert pod_requests(pod) == Requests(cpu, memory)


def test_host_ports_of_app_containers_and_sidecars_only() -> None:
    pod = {"spec": {
        "initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 81}]},
                           {"name": "s", "restartPolicy": "Always",
                            "ports": [{"containerPort": 1, "hostPort": 82,
                                       "protocol": "UDP"}]}],
        "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80,
                                                "hostIP": "10.0.0.1"},
                                               {"containerPort": 9}]}]}}
    assert parse_host_ports(pod) == (HostPort("TCP", "10.0.0.1", 80),
                                     HostPort("UDP", "0.0.0.0", 82))


@pytest.mark.parametrize(("wanted", "used", "conflict"), [
    (HostPort("TCP", "0.0.0.0", 80), HostPort("TCP", "10.0.0.1", 80), True),
    (HostPort("TCP", "10.0.0.1", 80), HostPort("TCP", "0.0.0.0", 80), True),
    (HostPort("TCP", "10.0.0.1", 80), HostPort("TCP", "10.0.0.2", 80), False),
    (HostPort("TCP", "0.0.0.0", 80), HostPort("UDP", "0.0.0.0", 80), False),
    (HostPort("TCP", "0.0.0.0", 80), HostPort("TCP", "0.0.0.0", 81), False),
])
def test_host_port_conflicts(wanted: HostPort, used: HostPort, conflict: bool) -> None:
    assert (conflicting([wanted], [used]) == wanted) is conflict


@pytest.mark.parametrize("ports", [[{"hostPort": 70000}], [{"hostPort": "80"}],
                                   [{"hostPort": 80, "protocol": "ICMP"}], "x"])
def test_bad_host_ports_are_errors(ports: Any) -> None:
    with pytest.raises(RequestError):
        parse_host_ports({"spec": {"containers": [{"name": "a", "ports": ports}]}})


def test_pod_facts() -> None:
    pod = builders.pod("p")
    pod["metadata"]["labels"] = {"app": "web"}
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    pod["spec"].update({
        "schedulingGates": [{"name": "kueue"}], "preemptionPolicy": "Never",
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
                    {"name": "tmp", "emptyDir": {}}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 7, "preference": {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}}]}},
    })
    info = parse(pod, Config())
    assert info.error is None
    assert info.labels == {"app": "web"}
    assert info.gates == ("kueue",)
    assert info.preemption_policy == "Never"
    assert info.claims == ("c1", "p-scratch")
    assert info.preferred_terms == ((7, SelectorTerm((Requirement("zone", "In", ("a",)),))),)
    assert info.created == 1767225600.0


@pytest.mark.parametrize("spec", [
    {"schedulingGates": [{"name": ""}]},
    {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {}}]}}},
    {"volumes": "x"},
])
def test_malformed_facts_make_a_pod_error_not_an_exception(spec: dict[str, Any]) -> None:
    pod = builders.pod("p")
    pod["spec"].update(spec)
    assert parse(pod, Config()).error is not None


@pytest.mark.parametrize(("raw", "labels", "matches"), [
    ({}, {"a": "1"}, True),  # an empty selector selects everything
    ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
     {"tier": "b"}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchLabels": {"app": "web"},
      "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "web"}, False),
])
def test_label_selectors(raw: dict[str, Any], labels: dict[str, str], matches: bool) -> None:
    selector = parse_selector(raw, "selector")
    assert selector is not None and selector.matches(labels) is matches


def test_no_selector_selects_nothing_and_bad_ones_are_errors() -> None:
    assert parse_selector(None, "s") is None
    assert LabelSelector((LabelRequirement("a", "Exists"),)).matches({"a": ""})
    for bad in ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
                {"matchExpressions": [{"key": "a", "operator": "In"}]},
                {"matchLabels": "x"}):
        with pytest.raises(RequestError):
            parse_selector(bad, "s")
