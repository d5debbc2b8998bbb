"""NodeResourcesFit through the whole scheduler on the in-memory cluster: every resource a
pod asks for, the names vgpu owns, the configured ignored resources, and the pods the
node already runs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scheduler.e2e_support import gpu_node, node_of, setup
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.config import Config, NodeResourcesFitArgs, SchedulerConfig, from_mapping
from vgpu.errors import ConfigError
from vgpu.quota_charge import NAMES

FPGA = "example.com/fpga"


def with_allocatable(node: Obj, extra: dict[str, str]) -> Obj:
    for part in ("allocatable", "capacity"):
        node["status"][part].update(extra)
    return node


def asking(name: str, limits: dict[str, str], *, node: str | None = None,
           gpus: int | None = None, **spec: Any) -> Obj:
    container = builders.container(gpus=gpus, cpu="100m")
    container["resources"].setdefault("limits", {}).update(limits)
    pod = builders.pod(name, [container], **spec)
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["spec"]["schedulerName"] = "default-scheduler"
    return pod


def event(cluster: Any, pod: str) -> str:
    message: str = cluster.events(name=pod)[0].message
    return message


def test_an_extended_resource_goes_where_the_node_has_it() -> None:
    sched, cluster, _ = setup([builders.node("plain"),
                               with_allocatable(builders.node("fpga"), {FPGA: "2"})])
    cluster.create("pods", asking("p", {FPGA: "2"}))
    cluster.create("pods", asking("q", {FPGA: "1"}))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "fpga"
    assert node_of(cluster, "q") is None
    assert event(cluster, "q") == (
        "0/2 nodes are available: 2 Insufficient example.com/fpga. preemption: 0/2 nodes "
        "are available: 1 No preemption victims found for incoming pod, 1 Preemption is "
        "not helpful for scheduling.")


def test_ephemeral_storage_and_hugepages_count_every_pod_on_the_node() -> None:
    node = with_allocatable(builders.node("n"), {"ephemeral-storage": "10Gi",
                                                 "hugepages-2Mi": "8Mi"})
    sched, cluster, _ = setup([node])
    cluster.create("pods", asking("theirs", {"ephemeral-storage": "6Gi", "hugepages-2Mi": "4Mi"},
                                  node="n"))
    cluster.create("pods", asking("big", {"ephemeral-storage": "5Gi"}))
    cluster.create("pods", asking("pages", {"hugepages-2Mi": "6Mi", "memory": "1Gi"}))
    cluster.create("pods", asking("fits", {"ephemeral-storage": "4Gi", "hugepages-2Mi": "4Mi",
                                           "memory": "1Gi"}))
    sched.run_until_idle()
    assert node_of(cluster, "fits") == "n"
    assert node_of(cluster, "big") is None and node_of(cluster, "pages") is None
    assert "1 Insufficient ephemeral-storage" in event(cluster, "big")
    assert "1 Insufficient hugepages-2Mi" in event(cluster, "pages")


def test_the_names_vgpu_owns_are_never_node_resources() -> None:
    # The node advertises fewer nvidia.com/gpu than the pod's vGPUs, and no gpumem,
    # gpucores, priority or vgpu.io/ resource at all: the VGPU plugin decides, on the inventory.
    node = with_allocatable(gpu_node("g", 2), {"nvidia.com/gpu": "1"})
    sched, cluster, _ = setup([node])
    pod = builders.pod("p", [builders.container(gpus=2, gpumem=1000)])
    pod["spec"]["containers"][0]["resources"]["limits"].update(
        {"vgpu.io/memory-mib": "2000", "vgpu.io/vgpus": "2", "nvidia.com/gpucores": "30",
         "nvidia.com/priority": "1"})
    cluster.create("pods", pod)
    sched.run_until_idle()
    assert node_of(cluster, "p") == "g"


def test_configured_ignored_resources_are_not_checked() -> None:
    config = Config(scheduler=SchedulerConfig(node_resources_fit=NodeResourcesFitArgs(
        ignored_resources=(FPGA,), ignored_resource_groups=("rdma",))))
    sched, cluster, _ = setup([builders.node("n")], config)
    cluster.create("pods", asking("p", {FPGA: "1", "rdma/hca": "2"}))
    cluster.create("pods", asking("q", {"example.com/other": "1"}))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n"
    assert "Insufficient example.com/other" in event(cluster, "q")


def test_a_node_that_gains_the_resource_wakes_the_pod() -> None:
    sched, cluster, clock = setup([builders.node("n")])
    cluster.create("pods", asking("p", {FPGA: "1"}))
    sched.run_until_idle()
    assert node_of(cluster, "p") is None
    clock.advance(5)  # past the backoff
    cluster.replace("nodes", with_allocatable(builders.node("n"), {FPGA: "1"}))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n"


def test_a_zero_request_fits_a_node_its_pods_overcommit() -> None:
    # kube-scheduler since 1.28; v1.20 said "Insufficient memory"
    # (docs/scheduler.md#known-differences).
    sched, cluster, _ = setup([builders.node("n", cpu="4", memory="1Gi")])
    cluster.create("pods", asking("theirs", {"memory": "2Gi"}, node="n"))
    cluster.create("pods", asking("p", {"cpu": "1"}))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n"


@pytest.mark.parametrize(("args", "message"), [
    ({"ignoredResources": ["not a name"]}, "ignoredResources: 'not a name' is not"),
    ({"ignoredResourceGroups": ["example.com/fpga"]}, "without '/'"),
    ({"ignoredResourceGroups": ["-bad"]}, "is not a resource group"),
])
def test_bad_ignored_resources_are_config_errors(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping({"scheduler": {"nodeResourcesFit": args}})


def test_ignored_resources_load_from_file_and_env() -> None:
    config = from_mapping({"scheduler": {"nodeResourcesFit": {"ignoredResources": [FPGA]}}},
                          {"VGPU_SCHEDULER__NODE_RESOURCES_FIT__IGNORED_RESOURCE_GROUPS":
                           "rdma,example.org"})
    args = config.scheduler.node_resources_fit
    assert (args.ignored_resources, args.ignored_resource_groups) == (
        (FPGA,), ("rdma", "example.org"))


def test_what_vgpu_owns() -> None:
    config = from_mapping({"resourceNames": {"gpumem": "example.com/vram"},
                           "nodeagent": {"resourceName": "example.com/vgpu"}})
    owned = ["vgpu.io/memory-mib", "vgpu.io/anything", "nvidia.com/gpu", "example.com/vram",
             "example.com/vgpu", "nvidia.com/gpucores"]
    assert all(config.owns_resource(name) for name in owned)
    assert not any(config.owns_resource(name) for name in (
        "nvidia.com/gpumem", FPGA, "cpu", "vgpu.io", "hugepages-2Mi"))


def test_the_default_names_are_all_owned() -> None:
    # Every configured vGPU name (the phase B split: NodeResourcesFit never checks them;
    # the quota work relies on it), the node agent's and the derived vgpu.io/ ones.
    config = Config()
    names = (*config.resource_names.all(), config.nodeagent.resource_name, *NAMES)
    assert set(config.resource_names.all()) == {
        "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores", "nvidia.com/priority"}
    assert all(config.owns_resource(name) for name in names)
