"""The ``DevicePlugin`` gRPC service the kubelet calls, over the agent's decisions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import grpc

from vgpu import logs
from vgpu_nodeagent.allocation.allocator import Allocator
from vgpu_nodeagent.allocation.errors import AllocateError
from vgpu_nodeagent.devices.virtual import PluginDevice
from vgpu_nodeagent.isolation.grants import ContainerGrant
from vgpu_nodeagent.proto import api_pb2, api_pb2_grpc

_log = logs.get("vgpu.nodeagent.plugin")

OPTIONS = api_pb2.DevicePluginOptions(pre_start_required=False,
                                      get_preferred_allocation_available=True)

#: Called after each Allocate with its duration in seconds and whether it succeeded.
AllocateObserver = Callable[[float, bool], None]


class DeviceList:
    """The advertised devices with a version, so ListAndWatch streams send each change."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._version = 0
        self._devices: tuple[PluginDevice, ...] = ()

    def set(self, devices: Sequence[PluginDevice]) -> bool:
        """Replace the list; True (and every stream wakes) when it changed."""
        with self._cond:
            devices = tuple(devices)
            if devices == self._devices and self._version:
                return False
            self._devices = devices
            self._version += 1
            self._cond.notify_all()
            return True

    def get(self) -> tuple[int, tuple[PluginDevice, ...]]:
        with self._cond:
            return self._version, self._devices

    def wait_newer(self, version: int, timeout: float) -> tuple[int, tuple[PluginDevice, ...]]:
        with self._cond:
            self._cond.wait_for(lambda: self._version != version, timeout)
            return self._version, self._devices


def list_response(devices: Sequence[PluginDevice]) -> api_pb2.ListAndWatchResponse:
    out = []
    for d in devices:
        device = api_pb2.Device(ID=d.id, health=d.health)
        if d.numa >= 0:
            device.topology.nodes.add(ID=d.numa)
        out.append(device)
    return api_pb2.ListAndWatchResponse(devices=out)


def container_response(item: ContainerGrant) -> api_pb2.ContainerAllocateResponse:
    return api_pb2.ContainerAllocateResponse(
        envs=dict(item.envs),
        mounts=[api_pb2.Mount(container_path=m.container_path, host_path=m.host_path,
                              read_only=m.read_only) for m in item.mounts],
    )


class DevicePluginService(api_pb2_grpc.DevicePluginServicer):
    def __init__(self, devices: DeviceList, allocator: Allocator, stopping: threading.Event,
                 observe: AllocateObserver | None = None, stream_tick: float = 0.5) -> None:
        self._devices = devices
        self._allocator = allocator
        self._stopping = stopping
        self._observe = observe
        self._tick = stream_tick
        #: ``time.monotonic()`` of the last GetPreferredAllocation or Allocate call.
        self.last_admission = 0.0

    def GetDevicePluginOptions(self, request: api_pb2.Empty,
                               context: Any) -> api_pb2.DevicePluginOptions:
        return OPTIONS

    def ListAndWatch(self, request: api_pb2.Empty,
                     context: Any) -> Iterator[api_pb2.ListAndWatchResponse]:
        version = -1
        _log.info("kubelet opened ListAndWatch")
        while context.is_active() and not self._stopping.is_set():
            new, devices = self._devices.wait_newer(version, self._tick)
            if new != version:
                version = new
                healthy = sum(1 for d in devices if d.healthy)
                _log.info("ListAndWatch sends devices", devices=len(devices), healthy=healthy)
                yield list_response(devices)

    def GetPreferredAllocation(self, request: api_pb2.PreferredAllocationRequest,
                               context: Any) -> api_pb2.PreferredAllocationResponse:
        self.last_admission = time.monotonic()
        responses = []
        matched: list[str] = []
        for req in request.container_requests:
            ids, container = self._allocator.preferred(
                list(req.available_deviceIDs), list(req.must_include_deviceIDs),
                int(req.allocation_size), skip=matched)
            if container is not None:
                matched.append(container)
            responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request: api_pb2.AllocateRequest,
                 context: Any) -> api_pb2.AllocateResponse:
        self.last_admission = time.monotonic()
        start = time.perf_counter()
        ok = False
        try:
            result = self._allocator.allocate(
                [list(r.devices_ids) for r in request.container_requests])
            ok = True
            return api_pb2.AllocateResponse(
                container_responses=[container_response(g) for g in result])
        except AllocateError as exc:
            context.abort(getattr(grpc.StatusCode, exc.code.value), str(exc))
            raise  # pragma: no cover - abort raises
        except Exception as exc:
            _log.exception("Allocate failed unexpectedly")
            context.abort(grpc.StatusCode.INTERNAL, f"node agent error: {exc}")
            raise  # pragma: no cover - abort raises
        finally:
            if self._observe is not None:
                self._observe(time.perf_counter() - start, ok)

    def PreStartContainer(self, request: api_pb2.PreStartContainerRequest,
                          context: Any) -> api_pb2.PreStartContainerResponse:
        return api_pb2.PreStartContainerResponse()
