"""The node agent over real gRPC on unix sockets, driven by the kubelet stand-in.

Registration, the device list and its health, the node's inventory and heartbeat, and
the metrics endpoint. Allocate and GetPreferredAllocation, the calls that admit a pod,
are in ``test_agent_allocate``.
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.nodeagent.conftest import (
    GPU0,
    GPU1,
    GPU2,
    NODE,
    gpu,
    small_config,
    wait_phase,
    wait_until,
    write_devices,
)
from tests.nodeagent.fake_pynvml import FakeNvml, Gpu
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu import times
from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT
from vgpu.codecs import decode_inventory
from vgpu_nodeagent.devices.nvml import NvmlDiscovery
from vgpu_nodeagent.proto import api_pb2

# -- registration ---------------------------------------------------------------------------

def test_registers_with_version_endpoint_resource_and_options(make_env: Any) -> None:
    env = make_env()
    request = env.kubelet.wait_registration()
    assert request.version == "v1beta1"
    assert request.endpoint == "vgpu.sock"
    assert request.resource_name == "nvidia.com/gpu"
    assert request.options.get_preferred_allocation_available is True
    assert request.options.pre_start_required is False
    options = env.kubelet.options()
    assert options.get_preferred_allocation_available is True
    assert env.kubelet.plugin().PreStartContainer(
        api_pb2.PreStartContainerRequest(devices_ids=[f"{GPU0}-0"]), timeout=5) \
        == api_pb2.PreStartContainerResponse()


def test_configured_resource_name_is_registered(make_env: Any) -> None:
    env = make_env(small_config(resource_name="example.com/vgpu"))
    assert env.kubelet.wait_registration().resource_name == "example.com/vgpu"


def test_registers_once_the_kubelet_appears(make_env: Any) -> None:
    env = make_env(start_kubelet=False)
    time.sleep(0.2)
    assert not env.kubelet.registrations
    env.kubelet.start()
    env.kubelet.wait_registration(timeout=2)


def test_kubelet_restart_serves_again_and_reregisters_within_a_second(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    started = env.kubelet.restart()
    env.kubelet.wait_registration(count=2, timeout=1.0)
    registered_at = env.kubelet.registrations[1][0]
    assert registered_at - started < 1.0
    # The new kubelet's stream works: it gets the full device list from the new socket.
    devices = env.kubelet.devices().wait_for(lambda d: len(d) == 30, timeout=1.0)
    assert {d.health for d in devices} == {"Healthy"}


# -- ListAndWatch ---------------------------------------------------------------------------

def test_list_and_watch_advertises_split_virtual_ids_with_numa(make_env: Any) -> None:
    env = make_env(split=4)
    env.kubelet.wait_registration()
    devices = env.kubelet.devices().wait_for(lambda d: len(d) == 12)
    ids = [d.ID for d in devices]
    assert ids[:4] == [f"{GPU0}-{i}" for i in range(4)]
    numa = {d.ID.rsplit("-", 1)[0]: [n.ID for n in d.topology.nodes] for d in devices}
    assert numa == {GPU0: [0], GPU1: [1], GPU2: [1]}


def test_health_flip_is_streamed_and_published(make_env: Any) -> None:
    env = make_env(split=2)
    env.kubelet.wait_registration()
    watch = env.kubelet.devices()
    watch.wait_for(lambda d: len(d) == 6)
    write_devices(env.devices_file, [gpu(GPU0, 0), gpu(GPU1, 1, numa=1, healthy=False),
                                     gpu(GPU2, 2, numa=1)])
    devices = watch.wait_for(lambda d: any(x.health == "Unhealthy" for x in d))
    assert {d.ID for d in devices if d.health == "Unhealthy"} == {f"{GPU1}-0", f"{GPU1}-1"}

    def inventory_health() -> dict[str, bool]:
        node = env.cluster.get("nodes", NODE)
        text = node["metadata"].get("annotations", {}).get(NODE_GPUS)
        return {d.uuid: d.healthy for d in decode_inventory(text).devices} if text else {}

    wait_until(lambda: inventory_health().get(GPU1) is False, what="inventory unhealthy")
    write_devices(env.devices_file, [gpu(GPU0, 0), gpu(GPU1, 1, numa=1), gpu(GPU2, 2, numa=1)])
    watch.wait_for(lambda d: all(x.health == "Healthy" for x in d))
    wait_until(lambda: inventory_health().get(GPU1) is True, what="inventory healthy again")


def test_xid_fault_marks_gpu_unhealthy_until_quiet_period_passes(make_env: Any) -> None:
    a, b = Gpu("GPU-a", numa=0), Gpu("GPU-b", numa=0)
    nvml = FakeNvml([a, b])
    env = make_env(small_config(health_quiet_seconds=0.5), split=1,
                   discovery=NvmlDiscovery(nvml))
    env.kubelet.wait_registration()
    watch = env.kubelet.devices()
    watch.wait_for(lambda d: [x.health for x in d] == ["Healthy", "Healthy"])
    nvml.push_xid(b, 43)  # an application's error: the GPU stays healthy
    nvml.push_xid(b, 79)  # the GPU fell off the bus
    faulted = time.monotonic()
    watch.wait_for(lambda d: [x.health for x in d] == ["Healthy", "Unhealthy"], timeout=2.0)
    watch.wait_for(lambda d: [x.health for x in d] == ["Healthy", "Healthy"], timeout=3.0)
    assert time.monotonic() - faulted >= 0.5
    assert env.agent.inventory().devices[1].healthy


# -- inventory ------------------------------------------------------------------------------

def test_inventory_and_heartbeat_are_written_and_decodable(make_env: Any) -> None:
    env = make_env(split=5)

    def annotations() -> dict[str, str]:
        return env.cluster.get("nodes", NODE)["metadata"].get("annotations") or {}

    wait_until(lambda: NODE_GPUS in annotations(), what="inventory annotation")
    inventory = decode_inventory(annotations()[NODE_GPUS])
    assert [(d.uuid, d.index, d.memory_mib, d.split, d.numa, d.cores, d.healthy)
            for d in inventory.devices] == [
        (GPU0, 0, 40960, 5, 0, 100, True), (GPU1, 1, 40960, 5, 1, 100, True),
        (GPU2, 2, 40960, 5, 1, 100, True)]
    first = times.parse(annotations()[NODE_HEARTBEAT])
    # heartbeat_seconds is 1 in these tests: the heartbeat moves on without any change.
    wait_until(lambda: times.parse(annotations()[NODE_HEARTBEAT]) > first, timeout=3,
               what="a newer heartbeat")


def test_metrics_and_healthz(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod("m", [container("c", 1)], namespace="default"), NODE,
                  {"c": slices((GPU1, 2048, 25))})
    env.kubelet.admit_pod([1])
    wait_phase(env, "m", "success")
    assert env.agent.metrics_server is not None
    base = f"http://127.0.0.1:{env.agent.metrics_server.port}"

    def scrape() -> str:
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as reply:
            return str(reply.read().decode())

    def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        out = {}
        for family in text_string_to_metric_families(scrape()):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def gpu_labels(uuid: str, index: int) -> tuple[tuple[str, str], ...]:
        return (("index", str(index)), ("model", "NVIDIA A100-SXM4-40GB"), ("uuid", uuid))

    granted = (("container", "c"), ("namespace", "default"), ("pod", "m"), ("uuid", GPU1))
    wait_until(lambda: ("vgpu_container_memory_granted_bytes", granted) in samples(),
               what="container metrics")
    got = samples()
    mib = 1024 * 1024
    assert got[("vgpu_gpu_memory_total_bytes", gpu_labels(GPU0, 0))] == 40960 * mib
    assert got[("vgpu_gpu_memory_used_bytes", gpu_labels(GPU0, 0))] == 1024 * mib
    assert got[("vgpu_gpu_utilization_percent", gpu_labels(GPU0, 0))] == 37
    assert ("vgpu_gpu_utilization_percent", gpu_labels(GPU1, 1)) not in got  # unknown
    assert got[("vgpu_gpu_healthy", gpu_labels(GPU2, 2))] == 1
    assert got[("vgpu_container_memory_granted_bytes", granted)] == 2048 * mib
    assert got[("vgpu_container_cores_granted_percent", granted)] == 25
    assert got[("vgpu_nodeagent_registered", ())] == 1
    assert got[("vgpu_nodeagent_allocations_total", (("result", "success"),))] == 1
    with urllib.request.urlopen(f"{base}/healthz", timeout=5) as reply:
        assert reply.status == 200
        assert "registered with the kubelet" in reply.read().decode()


def test_a_loop_that_ends_by_an_error_makes_healthz_fail(make_env: Any) -> None:
    """Issue 36: no silent thread death; the kubelet's liveness probe restarts the agent."""
    env = make_env()
    assert env.agent.healthz()[0]

    def broken() -> None:
        raise RuntimeError("a bug in a loop")

    env.agent._spawn("broken-loop", broken)
    wait_until(lambda: not env.agent.healthz()[0], what="healthz failing")
    _, text = env.agent.healthz()
    assert "loops ended: broken-loop" in text
