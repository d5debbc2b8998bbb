"""A stand-in for the ``pynvml`` module: the calls the NVML backend makes, over a table.

No GPU is available to the tests, so the NVML backend runs against this; names, constants
and the error class mirror nvidia-ml-py's.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
nvmlEventTypeXidCriticalError = 0x8
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_NVLINK_MAX_LINKS = 18  # 36 in nvidia-ml-py; fewer keeps the stand-in's loops short
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_NVLINK_VERSION_3_0 = 4
NVML_NVLINK_VERSION_4_0 = 6
NVML_NVLINK_VERSION_5_0 = 7
NVML_DEVICE_ARCH_AMPERE = 7
NVML_DEVICE_ARCH_HOPPER = 9
NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
                NVML_ERROR_NOT_SUPPORTED: "Not Supported",
                NVML_ERROR_TIMEOUT: "Timeout",
                NVML_ERROR_GPU_IS_LOST: "GPU is lost"}.get(self.value, "Unknown Error")


@dataclass
class NvLink:
    """One NVLink of a GPU: the PCI bus id at its far end, what sits there, its version."""

    remote_bus: str
    kind: int = NVML_NVLINK_DEVICE_TYPE_GPU
    version: int = NVML_NVLINK_VERSION_3_0
    active: bool = True
    broken: bool = False  # NVML fails on this link


@dataclass
class Gpu:
    uuid: str
    name: str = "NVIDIA A100-SXM4-40GB"
    total: int = 40 * 1024**3
    used: int = 2 * 1024**3
    utilization: int | None = 55
    numa: int | None = 0  # None: nvmlDeviceGetNumaNodeId not supported
    bus_id: str = "00000000:3B:00.0"
    mig: int | None = NVML_DEVICE_MIG_DISABLE  # None: not MIG-capable
    broken: bool = False
    events: str = "ok"  # "ok", "not-supported" or "error"
    #: (pid, used bytes or None) of the running compute processes
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    #: None: a GPU without NVLink (NVML answers NOT_SUPPORTED for every link)
    nvlinks: list[NvLink] | None = None
    #: NVML_DEVICE_ARCH_*; None: nvmlDeviceGetArchitecture fails (older drivers)
    arch: int | None = None
    #: (major, minor) CUDA compute capability; None: NVML answers NOT_SUPPORTED
    compute: tuple[int, int] | None = (8, 0)


@dataclass
class Struct:
    values: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


class FakeNvml:
    NVMLError = NVMLError

    def __init__(self, gpus: list[Gpu], *, init_error: int | None = None,
                 ancestors: dict[frozenset[str], int] | None = None,
                 remote_type: bool = True, cuda_driver: int | None = 12040) -> None:
        self.gpus = gpus
        #: nvmlSystemGetCudaDriverVersion_v2's answer; None: the call fails
        self.cuda_driver = cuda_driver
        #: The PCIe common ancestor per pair of UUIDs (NVML_TOPOLOGY_*); absent: SYSTEM,
        #: -1: NVML fails.
        self.ancestors = ancestors or {}
        if not remote_type:  # an nvidia-ml-py or driver from before the call
            self.nvmlDeviceGetNvLinkRemoteDeviceType = None  # type: ignore[method-assign]
        self.init_error = init_error
        self.initialised = False
        self.shutdown = False
        self.registered: list[str] = []
        self.events: deque[Any] = deque()
        self.waits = 0
        self.freed = False
        self._lock = threading.Lock()
        for name in dir(__import__(__name__, fromlist=["x"])):
            if name.startswith(("NVML_", "nvmlEventType")):
                setattr(self, name, globals()[name])

    def _gpu(self, handle: Any) -> Gpu:
        gpu: Gpu = handle
        if gpu.broken:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        if self.cuda_driver is None:
            raise NVMLError(NVML_ERROR_UNKNOWN)
        return self.cuda_driver

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        compute = self._gpu(handle).compute
        if compute is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return compute

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Gpu:
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, handle: Any) -> bytes:
        return self._gpu(handle).uuid.encode()

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Struct:
        gpu = self._gpu(handle)
        return Struct({"total": gpu.total, "used": gpu.used, "free": gpu.total - gpu.used})

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Struct:
        gpu = self._gpu(handle)
        if gpu.utilization is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return Struct({"gpu": gpu.utilization, "memory": 0})

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Struct]:
        return [Struct({"pid": pid, "usedGpuMemory": used})
                for pid, used in self._gpu(handle).processes]

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        gpu = self._gpu(handle)
        if gpu.numa is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu.numa

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Struct:
        return Struct({"busId": self._gpu(handle).bus_id.encode()})

    # -- links ---------------------------------------------------------------------------

    def _link(self, handle: Any, link: int) -> NvLink:
        gpu = self._gpu(handle)
        if gpu.nvlinks is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if link >= len(gpu.nvlinks):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if gpu.nvlinks[link].broken:
            raise NVMLError(NVML_ERROR_UNKNOWN)
        return gpu.nvlinks[link]

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        return NVML_FEATURE_ENABLED if self._link(handle, link).active else NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> Struct:
        return Struct({"busId": self._link(handle, link).remote_bus.encode()})

    def nvmlDeviceGetNvLinkVersion(self, handle: Any, link: int) -> int:
        return self._link(handle, link).version

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        return self._link(handle, link).kind

    def nvmlDeviceGetTopologyCommonAncestor(self, a: Any, b: Any) -> int:
        level = self.ancestors.get(frozenset((self._gpu(a).uuid, self._gpu(b).uuid)),
                                   NVML_TOPOLOGY_SYSTEM)
        if level < 0:
            raise NVMLError(NVML_ERROR_UNKNOWN)
        return level

    def nvmlDeviceGetArchitecture(self, handle: Any) -> int:
        arch = self._gpu(handle).arch
        if arch is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return arch

    def nvmlDeviceGetMigMode(self, handle: Any) -> tuple[int, int]:
        gpu = self._gpu(handle)
        if gpu.mig is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu.mig, gpu.mig

    # -- events ----------------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceRegisterEvents(self, handle: Any, types: int, event_set: str) -> None:
        gpu = self._gpu(handle)
        if gpu.events == "not-supported":
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if gpu.events == "error":
            raise NVMLError(NVML_ERROR_UNKNOWN)
        self.registered.append(gpu.uuid)

    def push_xid(self, gpu: Gpu | None, xid: int) -> None:
        self.events.append(Struct({"device": gpu, "eventType": nvmlEventTypeXidCriticalError,
                                   "eventData": xid}))

    def nvmlEventSetWait(self, event_set: str, timeout_ms: int) -> Any:
        with self._lock:
            self.waits += 1
            if not self.events:
                raise NVMLError(NVML_ERROR_TIMEOUT)
            event = self.events.popleft()
        if isinstance(event, int):
            raise NVMLError(event)
        return event

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.freed = True
