"""GPU choice policies as an extension point: plugins of the profile provide them, the
framework hands them to the vGPU plugin, and nothing is shared between profiles."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import vgpu.annotations as ann
from tests.scheduler.helpers import FakeClock
from tests.scheduler.test_e2e import gpu_node
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu.errors import ConfigError
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.registry import REGISTRY

PROFILE = ("PrioritySort", "NodeResourcesFit", "Probe", "VGPU", "VGPUBinder")


class Probe:
    """Provides the GPU policy "random" as: the highest GPU position first; remembers the
    nodes it ranked GPUs on."""

    name = "Probe"
    gpu_policy = "random"

    def __init__(self, handle: Handle) -> None:
        self.nodes: list[str] = []

    def rank_gpus(self, node: NodeInfo, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
        self.nodes.append(node.name)
        return sorted(cands, key=lambda c: -c.position)


class SecondProbe(Probe):
    name = "SecondProbe"


def scheduler(node: str, plugins: tuple[str, ...] = PROFILE,
              policy: str = "random") -> tuple[Scheduler, MemoryCluster]:
    cluster = MemoryCluster()
    cluster.create("nodes", gpu_node(node, 4))
    config = Config(default_gpu_policy=policy,
                    scheduler=SchedulerConfig(plugins=plugins, percentage_of_nodes_to_score=100))
    registry = {**REGISTRY, "Probe": Probe, "SecondProbe": SecondProbe}
    return Scheduler(config, cluster, clock=FakeClock(), registry=registry), cluster


def placed_gpu(cluster: MemoryCluster, pod: str) -> str:
    raw = cluster.get("pods", pod, "default")["metadata"]["annotations"][ann.ASSIGNMENT]
    [(granted,)] = codecs.decode_assignment(raw).containers.values()
    return granted.uuid


def probe(sched: Scheduler) -> Probe:
    [found] = [p for p in sched.framework.plugins if isinstance(p, Probe)]
    return found


def test_a_plugin_of_the_profile_provides_the_gpu_policy() -> None:
    sched, cluster = scheduler("n1")
    cluster.create("pods", builders.pod("p", [builders.container(gpus=1, gpumem=1000)]))
    sched.run_until_idle()
    assert placed_gpu(cluster, "p") == "GPU-n1-3"  # the probe's choice, not a built-in's
    assert probe(sched).nodes == ["n1"]


def test_two_schedulers_in_one_process_each_use_their_own_plugin() -> None:
    first, first_cluster = scheduler("a")
    second, second_cluster = scheduler("b")  # built last: a global "newest" would win
    first_cluster.create("pods", builders.pod("p", [builders.container(gpus=1, gpumem=1000)]))
    first.run_until_idle()
    second_cluster.create("pods", builders.pod("q", [builders.container(gpus=1, gpumem=1000)]))
    second.run_until_idle()
    assert probe(first).nodes == ["a"]
    assert probe(second).nodes == ["b"]


def test_two_plugins_providing_one_policy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="two plugins provide the GPU policy 'random'"):
        scheduler("n1", (*PROFILE, "SecondProbe"))


def test_a_default_policy_no_plugin_provides_is_a_config_error() -> None:
    plugins = tuple(p for p in PROFILE if p != "Probe")
    with pytest.raises(ConfigError, match="defaultGpuPolicy: 'random' is not available"):
        scheduler("n1", plugins)


def test_a_pod_asking_for_a_policy_the_profile_lacks_is_told_so() -> None:
    sched, cluster = scheduler("n1")
    cluster.create("pods", builders.pod("p", [builders.container(gpus=1, gpumem=1000)],
                                        annotations={ann.GPU_POLICY: "fgd"}))
    sched.run_until_idle()
    [event] = cluster.events(name="p")
    assert event.reason == "FailedScheduling"
    assert "GPU policy 'fgd' is not available" in event.message
    assert cluster.get("pods", "p", "default")["spec"].get("nodeName") is None


def test_built_in_policies_need_no_plugin() -> None:
    sched, cluster = scheduler("n1", tuple(p for p in PROFILE if p != "Probe"),
                               policy="binpack")
    cluster.create("pods", builders.pod("p", [builders.container(gpus=1, gpumem=1000)]))
    sched.run_until_idle()
    assert placed_gpu(cluster, "p") == "GPU-n1-0"
