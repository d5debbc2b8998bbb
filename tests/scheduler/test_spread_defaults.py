"""PodTopologySpread's cluster default constraints: the selector kube-scheduler derives
from the Services and the controller selecting a pod (``helper.DefaultSelector``), the
System and List defaulting types, and what wakes a pod the plugin rejected."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.affinity_support import (
    exists,
    handle,
    node_obj,
    pod,
    pod_obj,
    run_filter,
    snapshot_of,
    spread,
)
from vgpu.config import Config, PodTopologySpreadArgs, SchedulerConfig
from vgpu.labels import LabelRequirement, LabelSelector
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.spread import SpreadConstraint
from vgpu_scheduler.framework.status import Code
from vgpu_scheduler.plugins.kube.pod_topology_spread import PodTopologySpread


def svc(name: str, selector: dict[str, str] | None, ns: str = "default") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def owned(name: str, labels: dict[str, str], kind: str, owner: str,
          api_version: str = "apps/v1") -> Any:
    obj = pod_obj(name, labels)
    obj["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind,
                                           "name": owner, "controller": True}]
    return parse(obj, Config())


def workload(name: str, selector: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": selector}}


def listed(*constraints: str) -> Config:
    return Config(scheduler=SchedulerConfig(pod_topology_spread=PodTopologySpreadArgs(
        defaulting_type="List", default_constraints=constraints)))


def req(key: str, *values: str, op: str = "In") -> LabelRequirement:
    return LabelRequirement(key, op, frozenset(values))


def selector_of(plugin: PodTopologySpread, p: Any) -> LabelSelector | None:
    found = {c.selector for c in plugin.constraints(p)}
    assert len(found) <= 1
    return found.pop() if found else None


@pytest.mark.parametrize(("listers", "incoming", "want"), [
    ({"services": [svc("s", {"foo": "bar"})]}, pod("p", {"foo": "bar", "baz": "kar"}),
     (req("foo", "bar"),)),
    ({"services": [svc("s", {"baz": "kep"})]}, pod("p", {"foo": "bar"}), None),
    ({"services": [svc("s", None)]}, pod("p", {"foo": "bar"}), None),  # selects no pod
    ({"services": [svc("s", {"foo": "bar"}, ns="other")]}, pod("p", {"foo": "bar"}), None),
    ({"services": [svc("a", {"foo": "bar"}), svc("b", {"baz": "kar"})]},
     pod("p", {"foo": "bar", "baz": "kar"}), (req("baz", "kar"), req("foo", "bar"))),
    ({"replicasets": [workload("rs1", exists("foo"))]},
     owned("p", {"foo": "tar"}, "ReplicaSet", "rs1"), (req("foo", op="Exists"),)),
    ({"replicasets": [workload("rs1", exists("tar"))]},
     owned("p", {"foo": "bar"}, "ReplicaSet", "rs2"), None),  # its controller is not there
    ({"statefulsets": [workload("ss1", {"matchLabels": {"app": "db"}})],
      "services": [svc("s", {"tier": "data"})]},
     owned("p", {"app": "db", "tier": "data"}, "StatefulSet", "ss1"),
     (req("tier", "data"), req("app", "db"))),
    ({"replicationcontrollers": [workload("rc1", {"app": "web"})]},
     owned("p", {"app": "web"}, "ReplicationController", "rc1", "v1"), (req("app", "web"),)),
    ({"replicasets": [workload("rs1", exists("foo"))]},
     owned("p", {"foo": "x"}, "ReplicaSet", "rs1", "extensions/v1beta1"), None),
])
def test_the_default_selector(listers: dict[str, Any], incoming: Any, want: Any) -> None:
    plugin = PodTopologySpread(handle(**listers))
    got = selector_of(plugin, incoming)
    assert (got.requirements if got is not None else None) == want


def test_system_defaults_are_kubes_and_soft() -> None:
    plugin = PodTopologySpread(handle(services=[svc("s", {"app": "web"})]))
    got = plugin.constraints(pod("p", {"app": "web"}))
    sel = LabelSelector((req("app", "web"),))
    assert got == (SpreadConstraint(3, "kubernetes.io/hostname", "ScheduleAnyway", sel),
                   SpreadConstraint(5, "topology.kubernetes.io/zone", "ScheduleAnyway", sel))


def test_listed_defaults_filter_when_hard_and_a_pods_own_constraints_win() -> None:
    services = [svc("s", {"foo": "bar"})]
    plugin = PodTopologySpread(handle(listed("node:3:DoNotSchedule", "node:2:ScheduleAnyway",
                                             "rack:5:DoNotSchedule"), services=services))
    got = plugin.constraints(pod("p", {"foo": "bar", "baz": "kar"}))
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in got] == [
        ("node", 3, "DoNotSchedule"), ("node", 2, "ScheduleAnyway"),
        ("rack", 5, "DoNotSchedule")]
    own = pod("p", {"foo": "bar"}, constraints=[spread(1, "zone", {"matchLabels": {
        "baz": "tar"}})])
    assert [c.topology_key for c in plugin.constraints(own)] == ["zone"]
    nodes = [node_obj("n1", {"node": "n1", "rack": "r1"}),
             node_obj("n2", {"node": "n2", "rack": "r1"})]
    busy = [pod(f"e{i}", {"foo": "bar"}, node="n1") for i in range(4)]
    status, answers, _ = run_filter(plugin, pod("p", {"foo": "bar"}),
                                    snapshot_of(plugin, nodes, busy))
    assert status.ok and answers["n1"].code is Code.UNSCHEDULABLE and answers["n2"].ok


def test_list_defaulting_without_constraints_has_none_and_watches_nothing() -> None:
    h = handle(listed(), services=[svc("s", {"foo": "bar"})])
    plugin = PodTopologySpread(h)
    assert plugin.constraints(pod("p", {"foo": "bar"})) == ()
    assert set(h.listers) == {"services"}  # only the one this test put in


FOO_ZONE = [spread(1, "zone", exists("foo"))]


@pytest.mark.parametrize(("event", "helps"), [
    (ClusterEvent("pod", "add", "n", obj=pod_obj("a", {"foo": "1"}, node="n")), True),
    (ClusterEvent("pod", "add", "n", obj=pod_obj("a", {"bar": "1"}, node="n")), False),
    (ClusterEvent("pod", "add", "n", obj=pod_obj("a", {"foo": "1"}, namespace="x",
                                                 node="n")), False),
    (ClusterEvent("pod", "delete", "n", obj=pod_obj("a", {"foo": "1"}, node="n")), True),
    (ClusterEvent("pod", "update", "n", obj=pod_obj("a", {"bar": "1"}, node="n")), True),
    (ClusterEvent("node", "add", "n2"), True),
    (ClusterEvent("node", "update", "n2", changes=frozenset({"taints"})), True),
    (ClusterEvent("node", "update", "n2", changes=frozenset({"inventory"})), False),
    (ClusterEvent("services", "add", "", obj=svc("s", {"foo": "1"})), False),
])
def test_what_may_help_a_rejected_pod(event: ClusterEvent, helps: bool) -> None:
    plugin = PodTopologySpread(handle())
    assert plugin.could_help(pod("p", {"foo": "1"}, constraints=FOO_ZONE), event) is helps
