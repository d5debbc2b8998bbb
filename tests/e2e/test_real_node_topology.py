"""GPU links end to end on a real node: four fake GPUs as two NVLink-bridged pairs.

The node agent publishes the fake file's links in its inventory; the scheduler gives a
two-GPU pod a bridged pair rather than the first two free GPUs; the real kubelet, through
GetPreferredAllocation, hands the container slots on that same pair (its pod resources
and the container's environment say so); a pod that requires the fastest links waits
with a FailedScheduling that says why, and ``vgpu why`` says it too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import assignment_of
from tests.e2e.harness import FullStack, Gpu, NodeSpec, wait_until
from tests.e2e.real_node_support import (
    agent_metrics,
    assigned_view,
    container_env,
    kubelet_view,
    namespace_per_test,
    only_node,
    real_container,
    real_pod,
    real_stack,
)
from vgpu import meta
from vgpu.annotations import GPU_TOPOLOGY, NODE_GPUS, USE_GPUUUID
from vgpu.codecs import decode_inventory
from vgpu.config import Config
from vgpu.topology.links import label
from vgpu_kubectl.why import Cluster, build
from vgpu_scheduler.placement.linked import TOPOLOGY_SLOWER

A100 = "NVIDIA A100 80GB PCIe"
NODE = NodeSpec("real-links", (Gpu(A100, 81920, numa=0), Gpu(A100, 81920, numa=0),
                               Gpu(A100, 81920, numa=1), Gpu(A100, 81920, numa=1)),
                real=True,
                links=({"gpus": [0, 1], "pcie": "switch", "nvlinks": 12, "generation": 3},
                       {"gpus": [2, 3], "pcie": "switch", "nvlinks": 12, "generation": 3}))


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with real_stack(control_plane, NODE) as running:
        yield running


@pytest.fixture
def ns(stack: FullStack, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from namespace_per_test(stack, request.node.name)


node_name = only_node


def gpus_of(pod: dict[str, object], container: str = "main") -> list[int]:
    return sorted(int(s.uuid.rsplit("-", 1)[1])
                  for s in assignment_of(pod).containers[container])


def test_the_inventory_carries_the_links(stack: FullStack) -> None:
    inventory = decode_inventory(
        meta.annotations_of(stack.cluster.get("nodes", node_name(stack)))[NODE_GPUS])
    assert inventory.version == 3 and inventory.links is not None
    got = {(g.a.rsplit("-", 1)[1], g.b.rsplit("-", 1)[1]): label(g.link)
           for g in inventory.links}
    assert got == {("0", "1"): "NV12", ("2", "3"): "NV12", ("0", "2"): "SYS",
                   ("0", "3"): "SYS", ("1", "2"): "SYS", ("1", "3"): "SYS"}


def test_a_pair_gets_a_bridge_and_the_kubelet_agrees(stack: FullStack, ns: str) -> None:
    stack.create_pod(ns, real_pod("one", real_container("main", gpu=1, gpumem=1000,
                                                        gpucores=100)))
    one = stack.wait_allocated(ns, "one", timeout=60)
    # Alone on idle pairs, the one-GPU pod breaks a pair (every GPU is in one): GPU 0.
    assert gpus_of(one) == [0]
    stack.create_pod(ns, real_pod("pair", real_container("main", gpu=2, gpumem=1000,
                                                         gpucores=100)))
    pair = stack.wait_allocated(ns, "pair", timeout=60)
    # Without links the policy would take GPUs 1 and 2, across the bridges.
    assert gpus_of(pair) == [2, 3]
    want = assigned_view({"one": assignment_of(one), "pair": assignment_of(pair)})
    wait_until("the kubelet's pod resources list the assigned GPUs",
               lambda: kubelet_view(agent_metrics(stack, node_name(stack)), ns) == want, 30,
               interval=0.3, context=stack.logs)
    env = container_env(stack, ns, "pair", "main")
    uuids = stack.nodes[node_name(stack)].spec.uuids()
    assert sorted(env["NVIDIA_VISIBLE_DEVICES"].split(",")) == uuids[2:]
    report = build(ns, "pair", Cluster(stack.cluster.get("pods", "pair", ns), (),
                                       stack.cluster.list("nodes").items), config=Config(),
                   now=dt.datetime.now(dt.UTC))
    assert report.links == (f"main: GPUs 2,3 linked by NV12, the fastest {node_name(stack)} "
                            f"has for 2 GPUs",)


def test_required_waits_for_a_bridge_preferred_takes_what_is_free(
        stack: FullStack, ns: str) -> None:
    for name, gpu in (("a", 0), ("b", 2)):  # one GPU of each pair, pinned by UUID
        pinned = real_pod(name, real_container("main", gpu=1, gpumem=1000, gpucores=100))
        uuid = stack.nodes[node_name(stack)].spec.uuids()[gpu]
        pinned["metadata"]["annotations"] = {USE_GPUUUID: uuid}
        stack.create_pod(ns, pinned)
        assert gpus_of(stack.wait_allocated(ns, name, timeout=60)) == [gpu]
    required = real_pod("strict", real_container("main", gpu=2, gpumem=1000, gpucores=100))
    required["metadata"]["annotations"] = {GPU_TOPOLOGY: "required"}
    stack.create_pod(ns, required)
    wait_until("a FailedScheduling that names the links",
               lambda: any(TOPOLOGY_SLOWER in str(e.get("message"))
                           for e in stack.events(ns, "strict")), 30, interval=0.3,
               context=stack.logs)
    assert stack.cluster.get("pods", "strict", ns)["spec"].get("nodeName") is None
    stack.create_pod(ns, real_pod("loose", real_container("main", gpu=2, gpumem=1000,
                                                          gpucores=100)))
    loose = stack.wait_allocated(ns, "loose", timeout=60)
    assert gpus_of(loose) == [1, 3]  # one of each pair: SYS, the fastest free
