"""The NVML discovery backend (``pynvml`` from nvidia-ml-py) and its XID event watch.

The ``pynvml`` module is injected so tests run the real code against a stand-in; in
production it is imported here, and a node without the NVIDIA driver gets a
:class:`DiscoveryError` that says so instead of a traceback.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any

from vgpu import logs
from vgpu.errors import DiscoveryError
from vgpu.topology.links import GpuLink
from vgpu_nodeagent.devices.discovery import (
    NUMA_UNKNOWN,
    FaultHandler,
    GpuFacts,
    GpuProcess,
    GpuSample,
)
from vgpu_nodeagent.devices.nvml_links import pci_key as sysfs_pci_address
from vgpu_nodeagent.devices.nvml_links import read_links
from vgpu_nodeagent.devices.xid import is_device_fault, pci_address

_log = logs.get("vgpu.nodeagent.nvml")

MIB = 1024 * 1024
#: How long one event wait blocks, so that ``stop`` is noticed within about a second.
_EVENT_WAIT_MS = 1000
SYSFS_PCI = "/sys/bus/pci/devices"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlDiscovery:
    name = "nvml"
    #: Pause after a failed event wait, so a broken driver does not spin the thread.
    error_pause = 1.0

    def __init__(self, nvml: Any = None, sysfs_pci: str = SYSFS_PCI) -> None:
        if nvml is None:
            try:
                # Imported only here: agents on the fake backend never load it.
                import pynvml  # noqa: PLC0415
            except ImportError:  # pragma: no cover - nvidia-ml-py is a dependency
                raise DiscoveryError("the nvidia-ml-py package (pynvml) is not installed") \
                    from None
            nvml = pynvml
        self._nvml = nvml
        self._sysfs_pci = sysfs_pci
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise DiscoveryError(
                f"NVML is not available ({exc}): the NVIDIA driver must be installed and "
                "libnvidia-ml.so.1 visible to the agent (run it with the NVIDIA container "
                "runtime); on a node without GPUs use --fake-devices FILE") from None
        self._handles: dict[str, Any] = {}
        try:
            self._facts = self._read()
        except nvml.NVMLError as exc:
            self.close()
            raise DiscoveryError(f"NVML could not list the GPUs: {exc}") from None
        # Links do not change while the driver is loaded: read once, like the GPUs.
        self._links = read_links(nvml, [(f.uuid, self._handles[f.uuid]) for f in self._facts])

    def _read(self) -> tuple[GpuFacts, ...]:
        nvml = self._nvml
        facts: list[GpuFacts] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                fact = GpuFacts(
                    uuid=uuid, index=index, model=_text(nvml.nvmlDeviceGetName(handle)),
                    memory_mib=int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // MIB,
                    numa=self._numa(handle), mig=self._mig(handle), pci=self._pci(handle),
                    compute_major=self._compute_major(handle),
                )
            except nvml.NVMLError as exc:
                # One broken GPU must not take the others off the node.
                _log.error("skipping a GPU NVML cannot read", index=index, error=str(exc))
                continue
            self._handles[uuid] = handle
            facts.append(fact)
            if fact.mig:
                _log.warning("GPU has MIG enabled; vgpu does not share it", uuid=uuid,
                             index=index)
        return tuple(facts)

    def _numa(self, handle: Any) -> int:
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetNumaNodeId(handle))
        except (nvml.NVMLError, AttributeError):
            pass  # older drivers: ask the kernel about the PCI device instead
        try:
            bus_id = nvml.nvmlDeviceGetPciInfo(handle).busId
            path = f"{self._sysfs_pci}/{sysfs_pci_address(bus_id)}/numa_node"
            with open(path, encoding="ascii") as handle_file:
                numa = int(handle_file.read().strip())
        except (nvml.NVMLError, OSError, ValueError):
            return NUMA_UNKNOWN
        return numa if numa >= 0 else NUMA_UNKNOWN

    def _pci(self, handle: Any) -> str:
        try:
            return pci_address(_text(self._nvml.nvmlDeviceGetPciInfo(handle).busId))
        except self._nvml.NVMLError:
            return ""

    def _compute_major(self, handle: Any) -> int:
        try:
            major, _minor = self._nvml.nvmlDeviceGetCudaComputeCapability(handle)
        except (self._nvml.NVMLError, AttributeError, TypeError, ValueError):
            return 0
        return int(major) if isinstance(major, int) and 0 < major < 100 else 0

    def cuda_driver_version(self) -> int | None:
        nvml = self._nvml
        for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            try:
                version = getattr(nvml, name)()
            except (nvml.NVMLError, AttributeError):
                continue
            if isinstance(version, int) and version > 0:
                return version
        return None

    def _mig(self, handle: Any) -> bool:
        nvml = self._nvml
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError:
            return False  # not a MIG-capable GPU
        return bool(current == nvml.NVML_DEVICE_MIG_ENABLE)

    # -- Discovery -------------------------------------------------------------------------

    def devices(self) -> tuple[GpuFacts, ...]:
        return self._facts

    def links(self) -> tuple[GpuLink, ...] | None:
        return self._links

    def refresh(self) -> bool:
        # GPUs do not come and go while the driver is loaded; faults arrive as events.
        return False

    def samples(self) -> Mapping[str, GpuSample]:
        nvml = self._nvml
        out: dict[str, GpuSample] = {}
        for uuid, handle in self._handles.items():
            used: int | None = None
            utilization: int | None = None
            with contextlib.suppress(nvml.NVMLError):
                used = int(nvml.nvmlDeviceGetMemoryInfo(handle).used) // MIB
            with contextlib.suppress(nvml.NVMLError):
                utilization = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            processes: tuple[GpuProcess, ...] = ()
            with contextlib.suppress(nvml.NVMLError):
                processes = tuple(
                    GpuProcess(int(p.pid), None if p.usedGpuMemory is None
                               else int(p.usedGpuMemory) // MIB)
                    for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))
            out[uuid] = GpuSample(memory_used_mib=used, utilization=utilization,
                                  processes=processes)
        return out

    def watch_faults(self, on_fault: FaultHandler, stop: threading.Event) -> None:
        """Wait for critical XID events and report each (the agent decides what a device
        fault is; an application's XID still matters to the clients of an MPS server)."""
        nvml = self._nvml
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            _log.error("cannot watch GPU faults: NVML event set failed", error=str(exc))
            return
        try:
            for uuid, handle in self._handles.items():
                try:
                    nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError,
                                                  event_set)
                except nvml.NVMLError as exc:
                    if getattr(exc, "value", None) == nvml.NVML_ERROR_NOT_SUPPORTED:
                        _log.warning("GPU does not report XID events; its faults go unseen",
                                     uuid=uuid)
                    else:
                        _log.error("cannot watch a GPU's faults; marking it unhealthy",
                                   uuid=uuid, error=str(exc))
                        on_fault(uuid, 0)
            self._event_loop(event_set, on_fault, stop)
        finally:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlEventSetFree(event_set)

    def _event_loop(self, event_set: Any, on_fault: FaultHandler,
                    stop: threading.Event) -> None:
        nvml = self._nvml
        while not stop.is_set():
            try:
                event = nvml.nvmlEventSetWait(event_set, _EVENT_WAIT_MS)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) != nvml.NVML_ERROR_TIMEOUT:
                    _log.error("waiting for GPU events failed", error=str(exc))
                    stop.wait(self.error_pause)
                continue
            if event.eventType != nvml.nvmlEventTypeXidCriticalError:
                continue
            xid = int(event.eventData)
            uuid = self._uuid_of(event.device)
            if is_device_fault(xid):
                _log.warning("GPU fault", xid=xid, uuid=uuid or "all GPUs")
            else:
                _log.info("application XID, GPU stays healthy", xid=xid, uuid=uuid)
            on_fault(uuid, xid)

    def _uuid_of(self, handle: Any) -> str | None:
        if not handle:
            return None
        for uuid, known in self._handles.items():
            if known == handle:
                return uuid
        try:
            return _text(self._nvml.nvmlDeviceGetUUID(handle))
        except self._nvml.NVMLError:
            return None

    def close(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()
