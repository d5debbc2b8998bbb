"""The NVML backend against a stand-in of pynvml (no GPU in the test environment)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.nodeagent.fake_pynvml import (
    NVML_DEVICE_MIG_ENABLE,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_UNKNOWN,
    FakeNvml,
    Gpu,
)
from vgpu.errors import DiscoveryError
from vgpu_nodeagent.devices.discovery import GpuFacts, GpuSample
from vgpu_nodeagent.devices.nvml import NvmlDiscovery, sysfs_pci_address
from vgpu_nodeagent.devices.virtual import usable

GIB = 1024**3


def test_discovers_uuid_model_memory_numa_and_mig(tmp_path: Path) -> None:
    pci = tmp_path / "0000:86:00.0"
    pci.mkdir()
    (pci / "numa_node").write_text("1\n")
    nvml = FakeNvml([
        Gpu("GPU-a", total=80 * GIB, numa=0),
        Gpu("GPU-b", name="NVIDIA H100", numa=None, bus_id="00000000:86:00.0"),
        Gpu("GPU-c", numa=None, bus_id="00000000:AF:00.0"),  # no sysfs entry: unknown
        Gpu("GPU-m", mig=NVML_DEVICE_MIG_ENABLE),
        Gpu("GPU-old", mig=None, compute=None),  # not MIG-capable; no compute capability
    ])
    discovery = NvmlDiscovery(nvml, sysfs_pci=str(tmp_path))
    # The PCI address in the one spelling the kernel's Xid lines are matched in.
    assert discovery.devices() == (
        GpuFacts("GPU-a", 0, "NVIDIA A100-SXM4-40GB", 81920, numa=0, pci="0000:3b:00",
                 compute_major=8),
        GpuFacts("GPU-b", 1, "NVIDIA H100", 40960, numa=1, pci="0000:86:00", compute_major=8),
        GpuFacts("GPU-c", 2, "NVIDIA A100-SXM4-40GB", 40960, numa=-1, pci="0000:af:00",
                 compute_major=8),
        GpuFacts("GPU-m", 3, "NVIDIA A100-SXM4-40GB", 40960, numa=0, mig=True,
                 pci="0000:3b:00", compute_major=8),
        GpuFacts("GPU-old", 4, "NVIDIA A100-SXM4-40GB", 40960, numa=0, pci="0000:3b:00"),
    )
    assert [f.uuid for f in usable(discovery.devices())] == ["GPU-a", "GPU-b", "GPU-c",
                                                            "GPU-old"]
    assert discovery.refresh() is False
    discovery.close()
    assert nvml.shutdown


def test_the_drivers_cuda_version_picks_the_hami_core_build() -> None:
    assert NvmlDiscovery(FakeNvml([Gpu("GPU-a")], cuda_driver=13000)).cuda_driver_version() \
        == 13000
    # A driver that cannot say: unknown, and no build is chosen (hami_library refuses).
    assert NvmlDiscovery(FakeNvml([Gpu("GPU-a")], cuda_driver=None)).cuda_driver_version() \
        is None


def test_a_gpu_nvml_cannot_read_is_skipped() -> None:
    discovery = NvmlDiscovery(FakeNvml([Gpu("GPU-a"), Gpu("GPU-lost", broken=True),
                                        Gpu("GPU-c")]))
    assert [(f.uuid, f.index) for f in discovery.devices()] == [("GPU-a", 0), ("GPU-c", 2)]


def test_samples() -> None:
    discovery = NvmlDiscovery(FakeNvml([Gpu("GPU-a", used=3 * GIB, utilization=80),
                                        Gpu("GPU-b", utilization=None)]))
    assert discovery.samples() == {"GPU-a": GpuSample(3072, 80), "GPU-b": GpuSample(2048, None)}


def test_missing_driver_is_a_clear_discovery_error() -> None:
    with pytest.raises(DiscoveryError) as info:
        NvmlDiscovery(FakeNvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND))
    message = str(info.value)
    assert "NVML is not available (NVML Shared Library Not Found)" in message
    assert "--fake-devices" in message


def test_real_pynvml_without_a_driver_is_a_clear_discovery_error() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # pragma: no cover - only on a machine with a GPU driver
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present")
    with pytest.raises(DiscoveryError, match="NVML is not available"):
        NvmlDiscovery()


@pytest.mark.parametrize(("bus_id", "expected"), [
    ("00000000:3B:00.0", "0000:3b:00.0"), ("0000:af:00.0", "0000:af:00.0"),
])
def test_sysfs_pci_address(bus_id: str, expected: str) -> None:
    assert sysfs_pci_address(bus_id) == expected


def run_watch(nvml: FakeNvml, until_waits: int) -> list[tuple[str | None, int]]:
    discovery = NvmlDiscovery(nvml)
    discovery.error_pause = 0.01
    faults: list[tuple[str | None, int]] = []
    stop = threading.Event()

    def on_fault(uuid: str | None, xid: int) -> None:
        faults.append((uuid, xid))

    def stopper() -> None:
        while nvml.waits < until_waits:
            stop.wait(0.001)
        stop.set()

    thread = threading.Thread(target=stopper)
    thread.start()
    discovery.watch_faults(on_fault, stop)
    thread.join()
    assert nvml.freed
    return faults


def test_every_xid_is_reported_with_its_gpu() -> None:
    # The agent tells device faults (health) from an application's (the GPU stays
    # healthy, but the clients of its MPS server were ended): every XID reaches it.
    a, b = Gpu("GPU-a"), Gpu("GPU-b")
    nvml = FakeNvml([a, b])
    nvml.push_xid(a, 13)   # an application's error
    nvml.push_xid(b, 79)   # fell off the bus
    nvml.events.append(NVML_ERROR_UNKNOWN)  # a failed wait is logged and retried
    nvml.push_xid(a, 31)
    nvml.push_xid(None, 48)  # no device: every GPU
    assert run_watch(nvml, until_waits=8) == [("GPU-a", 13), ("GPU-b", 79), ("GPU-a", 31),
                                              (None, 48)]
    assert nvml.registered == ["GPU-a", "GPU-b"]


def test_gpus_that_cannot_register_events() -> None:
    nvml = FakeNvml([Gpu("GPU-a", events="not-supported"), Gpu("GPU-b", events="error"),
                     Gpu("GPU-c")])
    # Not supported: faults go unseen (a warning); any other error: the GPU is suspect.
    assert run_watch(nvml, until_waits=2) == [("GPU-b", 0)]
    assert nvml.registered == ["GPU-c"]
