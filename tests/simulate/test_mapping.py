from __future__ import annotations

import pytest

from vgpu.config import Config
from vgpu_scheduler.framework.nodeinfo import parse_node
from vgpu_scheduler.framework.podinfo import parse
from vgpu_simulate import mapping
from vgpu_simulate.trace import TraceNode, TracePod


@pytest.mark.parametrize(("pod", "count", "cores", "percent"), [
    (TracePod("share", 6000, 12288, 1, 460), 1, 46, 46),
    (TracePod("whole", 12000, 16384, 1, 1000), 1, 100, 100),
    (TracePod("eight", 64000, 0, 8, 1000), 8, 100, 100),
    (TracePod("odd", 1000, 0, 1, 455), 1, 46, 46),  # rounded up, never less than asked
])
def test_gpu_pods_ask_for_vgpus_with_their_share(pod: TracePod, count: int, cores: int,
                                                 percent: int) -> None:
    info = parse(mapping.pod_object(pod, Config()), Config())
    assert info.error is None and info.gpu is not None
    (container,) = info.gpu.containers
    assert (container.count, container.cores, container.memory_percent) == (
        count, cores, percent)
    assert container.exclusive == (cores == 100)
    assert info.cpu_milli == pod.cpu_milli
    assert info.memory == (pod.memory_mib or 0) * 1024 * 1024
    assert mapping.allocated_milli(pod) == count * cores * 10


def test_cpu_only_and_nomem_pods_ask_for_what_they_have() -> None:
    info = parse(mapping.pod_object(TracePod("cpu", 4000, None, 0, 0), Config()), Config())
    assert info.gpu is None and info.cpu_milli == 4000 and info.memory == 0
    assert mapping.allocated_milli(TracePod("cpu", 4000, None, 0, 0)) == 0


def test_gpu_models_become_use_gputype() -> None:
    pod = mapping.pod_object(TracePod("p", 1000, 0, 1, 500, ("V100M16", "V100M32")), Config())
    info = parse(pod, Config())
    assert info.gpu is not None
    assert info.gpu.choices.selector.use_types == ("V100M16", "V100M32")


def test_nodes_carry_inventory_cpu_memory_and_enough_slots() -> None:
    static = parse_node(mapping.node_object(TraceNode("n", 96000, 393216, 8, "G2"), 1e9))
    assert (static.alloc_cpu, static.alloc_memory) == (96000, 393216 * 1024 * 1024)
    assert static.alloc_pods == mapping.PODS_PER_NODE
    assert len(static.devices) == 8 and static.heartbeat == 1e9
    assert {(d.model, d.memory_mib, d.split) for d in static.devices} == {
        ("G2", 32768, mapping.SLOTS_PER_GPU)}
    cpu_only = parse_node(mapping.node_object(TraceNode("c", 32000, 1024, 0, ""), 1e9))
    assert cpu_only.devices == ()
