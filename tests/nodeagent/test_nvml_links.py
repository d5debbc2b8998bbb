"""The links NVML discovery reads, against the stand-in of pynvml (no GPU here: the code
has not run on a real one yet)."""

from __future__ import annotations

from tests.nodeagent.fake_pynvml import (
    NVML_DEVICE_ARCH_AMPERE,
    NVML_DEVICE_ARCH_HOPPER,
    NVML_NVLINK_DEVICE_TYPE_GPU,
    NVML_NVLINK_DEVICE_TYPE_IBMNPU,
    NVML_NVLINK_DEVICE_TYPE_SWITCH,
    NVML_NVLINK_VERSION_4_0,
    NVML_NVLINK_VERSION_5_0,
    NVML_TOPOLOGY_HOSTBRIDGE,
    NVML_TOPOLOGY_INTERNAL,
    NVML_TOPOLOGY_MULTIPLE,
    NVML_TOPOLOGY_NODE,
    NVML_TOPOLOGY_SINGLE,
    FakeNvml,
    Gpu,
    NvLink,
)
from vgpu.topology.links import GpuLink, Link, label
from vgpu_nodeagent.devices.inventory import inventory
from vgpu_nodeagent.devices.nvml import NvmlDiscovery
from vgpu_nodeagent.devices.nvml_links import pci_key

BUS = ["00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0", "00000000:61:00.0"]
SWITCHES = ["00000000:05:00.0", "00000000:06:00.0", "00000000:07:00.0", "00000000:08:00.0"]


def gpu(i: int, nvlinks: list[NvLink] | None = None, **kw: object) -> Gpu:
    return Gpu(f"GPU-{i}", bus_id=BUS[i], nvlinks=nvlinks, **kw)  # type: ignore[arg-type]


def pairs(discovery: NvmlDiscovery) -> dict[tuple[str, str], str]:
    return {(g.a, g.b): label(g.link) for g in discovery.links() or ()}


def test_bridged_pairs_and_pcie_ancestors() -> None:
    to = [NvLink(BUS[1])] * 12 + [NvLink(BUS[1], active=False)] * 2
    nvml = FakeNvml([gpu(0, to), gpu(1, [NvLink(BUS[0])] * 12), gpu(2, [NvLink(BUS[3])] * 4),
                     gpu(3, [NvLink(BUS[2])] * 4)],
                    ancestors={frozenset(("GPU-0", "GPU-1")): NVML_TOPOLOGY_SINGLE,
                               frozenset(("GPU-2", "GPU-3")): NVML_TOPOLOGY_MULTIPLE,
                               frozenset(("GPU-0", "GPU-2")): NVML_TOPOLOGY_NODE,
                               frozenset(("GPU-1", "GPU-2")): NVML_TOPOLOGY_HOSTBRIDGE,
                               frozenset(("GPU-0", "GPU-3")): NVML_TOPOLOGY_INTERNAL})
    discovery = NvmlDiscovery(nvml)
    links = discovery.links() or ()
    assert GpuLink("GPU-0", "GPU-1", Link("switch", 12, 3)) in links  # inactive ones left out
    assert pairs(discovery) == {
        ("GPU-0", "GPU-1"): "NV12", ("GPU-0", "GPU-2"): "NODE", ("GPU-0", "GPU-3"): "BRD",
        ("GPU-1", "GPU-2"): "PHB", ("GPU-1", "GPU-3"): "SYS", ("GPU-2", "GPU-3"): "NV4"}
    published = inventory(discovery.devices(), (), 10, links=discovery.links())
    assert published.links is not None and len(published.links) == 6


def test_nvswitch_pairs_talk_at_the_fewer_switch_links() -> None:
    def wired(count: int) -> list[NvLink]:
        return [NvLink(SWITCHES[i % 4], NVML_NVLINK_DEVICE_TYPE_SWITCH, NVML_NVLINK_VERSION_4_0)
                for i in range(count)]

    discovery = NvmlDiscovery(FakeNvml([gpu(0, wired(18)), gpu(1, wired(18)),
                                        gpu(2, wired(16)), gpu(3, None)]))
    links = {(g.a, g.b): g.link for g in discovery.links() or ()}
    assert links["GPU-0", "GPU-1"] == Link("system", 18, 4, nvswitch=True)
    assert label(links["GPU-0", "GPU-2"]) == "NVS16"
    assert label(links["GPU-0", "GPU-3"]) == "SYS"  # GPU 3 has no NVLink at all


def test_the_architecture_names_the_generation_when_nvml_gives_it() -> None:
    # H100s have been seen to answer NVLink version 5.0: Hopper's NVLink is the 4th.
    hopper = [NvLink(SWITCHES[0], NVML_NVLINK_DEVICE_TYPE_SWITCH, NVML_NVLINK_VERSION_5_0)] * 18
    discovery = NvmlDiscovery(FakeNvml([gpu(i, hopper, arch=NVML_DEVICE_ARCH_HOPPER)
                                        for i in range(2)]))
    assert [g.link for g in discovery.links() or ()] == [Link("system", 18, 4, nvswitch=True)]
    # No architecture answer: the version decides (5.0 is NVLink 5).
    discovery = NvmlDiscovery(FakeNvml([gpu(i, hopper) for i in range(2)]))
    assert [g.link.generation for g in discovery.links() or ()] == [5]
    # An Ampere bridge whose version NVML cannot read still has its generation.
    bridged = [NvLink(BUS[1], version=0)] * 4, [NvLink(BUS[0], version=0)] * 4
    discovery = NvmlDiscovery(FakeNvml([gpu(i, bridged[i], arch=NVML_DEVICE_ARCH_AMPERE)
                                        for i in range(2)]))
    assert [g.link for g in discovery.links() or ()] == [Link("system", 4, 3)]


def test_an_unknown_far_end_counts_as_a_switch_when_the_driver_cannot_say() -> None:
    far = [NvLink(SWITCHES[0], NVML_NVLINK_DEVICE_TYPE_SWITCH)] * 6
    discovery = NvmlDiscovery(FakeNvml([gpu(0, far), gpu(1, far)], remote_type=False))
    assert pairs(discovery) == {("GPU-0", "GPU-1"): "NVS6"}


def test_links_to_gpus_and_npus_that_are_not_ours_join_nothing() -> None:
    # GPU 0's links go to a GPU the agent does not list (MIG) and to an IBM NPU.
    other = [NvLink("00000000:99:00.0", NVML_NVLINK_DEVICE_TYPE_GPU),
             NvLink("00000000:98:00.0", NVML_NVLINK_DEVICE_TYPE_IBMNPU)]
    discovery = NvmlDiscovery(FakeNvml([gpu(0, other), gpu(1, None)]))
    assert pairs(discovery) == {("GPU-0", "GPU-1"): "SYS"}


def test_what_nvml_cannot_answer_is_left_unknown() -> None:
    links = [NvLink(BUS[1], broken=True)] * 2 + [NvLink(BUS[1])] * 2
    nvml = FakeNvml([gpu(0, links), gpu(1, [NvLink(BUS[0])] * 2), gpu(2, None)],
                    ancestors={frozenset(("GPU-0", "GPU-2")): -1})
    discovery = NvmlDiscovery(nvml)
    assert pairs(discovery) == {("GPU-0", "GPU-1"): "NV2", ("GPU-0", "GPU-2"): "?",
                                ("GPU-1", "GPU-2"): "SYS"}


def test_one_gpu_has_no_peer() -> None:
    discovery = NvmlDiscovery(FakeNvml([gpu(0, None)]))
    assert discovery.links() == ()
    # Known and empty: not the "unknown topology" of an agent that cannot tell.
    assert inventory(discovery.devices(), (), 10, links=discovery.links()).links == ()


def test_pci_keys() -> None:
    assert pci_key(b"00000000:3B:00.0") == pci_key("0000:3b:00.0") == "0000:3b:00.0"
