"""A kubelet stand-in for device-plugin tests: the kubelet's side of the v1beta1 API.

It serves ``Registration`` on ``<dir>/kubelet.sock``, and on each registration dials the
plugin's endpoint and opens ``ListAndWatch`` in the background, as the kubelet's device
manager does. :meth:`KubeletStandIn.admit_container` then allocates the way the kubelet
does: reuse an init container's devices when they suffice, otherwise pick from the
healthy unallocated devices with the plugin's preferred allocation, then ``Allocate``.
:meth:`KubeletStandIn.restart` is a kubelet restart: every socket in the folder is
removed and a new ``kubelet.sock`` is served.

Unix socket paths are limited to about 107 bytes: give it a short folder
(:func:`short_tempdir`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from vgpu_nodeagent.proto import api_pb2, api_pb2_grpc

KUBELET_SOCKET = "kubelet.sock"


def short_tempdir(prefix: str = "vk") -> str:
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


@contextlib.contextmanager
def device_plugin_dir() -> Iterator[str]:
    path = short_tempdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class DeviceWatch:
    """A ListAndWatch stream read in a thread; keeps the latest device list."""

    def __init__(self, stub: api_pb2_grpc.DevicePluginStub) -> None:
        self._cond = threading.Condition()
        self.devices: list[api_pb2.Device] = []
        self.updates = 0
        self.ended = False
        self._call = stub.ListAndWatch(api_pb2.Empty())
        self._thread = threading.Thread(target=self._read, daemon=True, name="list-and-watch")
        self._thread.start()

    def _read(self) -> None:
        try:
            for response in self._call:
                with self._cond:
                    self.devices = list(response.devices)
                    self.updates += 1
                    self._cond.notify_all()
        except grpc.RpcError:
            pass
        finally:
            with self._cond:
                self.ended = True
                self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[api_pb2.Device]], bool],
                 timeout: float = 5.0) -> list[api_pb2.Device]:
        """The first device list (current or streamed later) satisfying ``predicate``."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self.updates > 0 and predicate(self.devices),
                                     timeout)
            if not ok:
                raise TimeoutError(f"no matching ListAndWatch update within {timeout}s; "
                                   f"latest: {[(d.ID, d.health) for d in self.devices]}")
            return list(self.devices)

    def healthy_ids(self) -> list[str]:
        with self._cond:
            return [d.ID for d in self.devices if d.health == "Healthy"]

    def cancel(self) -> None:
        self._call.cancel()
        self._thread.join(timeout=5)


class _Registration(api_pb2_grpc.RegistrationServicer):
    def __init__(self, kubelet: KubeletStandIn) -> None:
        self._kubelet = kubelet

    def Register(self, request: api_pb2.RegisterRequest, context: Any) -> api_pb2.Empty:
        if self._kubelet.reject_with is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, self._kubelet.reject_with)
        self._kubelet._registered(request)
        return api_pb2.Empty()


class KubeletStandIn:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.socket = os.path.join(directory, KUBELET_SOCKET)
        self.registrations: list[tuple[float, api_pb2.RegisterRequest]] = []
        self.reject_with: str | None = None
        self.allocated: set[str] = set()
        self._cond = threading.Condition()
        self._server: grpc.Server | None = None
        self._channel: grpc.Channel | None = None
        self.stub: api_pb2_grpc.DevicePluginStub | None = None
        self.watch: DeviceWatch | None = None
        self._connector: threading.Thread | None = None

    # -- the kubelet's Registration service ------------------------------------------------

    def start(self) -> None:
        server = grpc.server(ThreadPoolExecutor(max_workers=4))
        api_pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server

    def _registered(self, request: api_pb2.RegisterRequest) -> None:
        with self._cond:
            self.registrations.append((time.monotonic(), request))
            self._cond.notify_all()
        # Like the device manager: answer first, then dial the plugin and watch its devices.
        self._connector = threading.Thread(target=self._connect, args=(request.endpoint,),
                                           daemon=True, name="kubelet-connect")
        self._connector.start()

    def _connect(self, endpoint: str) -> None:
        self._close_plugin()
        channel = grpc.insecure_channel(f"unix:{os.path.join(self.directory, endpoint)}")
        stub = api_pb2_grpc.DevicePluginStub(channel)
        with self._cond:
            self._channel, self.stub = channel, stub
            self.watch = DeviceWatch(stub)
            self._cond.notify_all()

    def _close_plugin(self) -> None:
        with self._cond:
            watch, channel = self.watch, self._channel
            self.watch, self._channel, self.stub = None, None, None
        if watch is not None:
            watch.cancel()
        if channel is not None:
            channel.close()

    def wait_registration(self, count: int = 1, timeout: float = 5.0) -> api_pb2.RegisterRequest:
        """The ``count``-th registration, once it happened and its watch is open."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: len(self.registrations) >= count and self.watch is not None, timeout)
            if not ok:
                raise TimeoutError(f"{len(self.registrations)} registration(s) within "
                                   f"{timeout}s, expected {count}")
            return self.registrations[count - 1][1]

    def plugin(self) -> api_pb2_grpc.DevicePluginStub:
        with self._cond:
            assert self.stub is not None, "no plugin registered"
            return self.stub

    def devices(self) -> DeviceWatch:
        with self._cond:
            assert self.watch is not None, "no plugin registered"
            return self.watch

    # -- lifecycle -------------------------------------------------------------------------

    def stop(self) -> None:
        self._close_plugin()
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None

    def restart(self) -> float:
        """A kubelet restart: stop, delete every socket in the folder, serve a new
        ``kubelet.sock``. Returns the monotonic time the new kubelet started serving."""
        self.stop()
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
        self.allocated.clear()
        self.start()
        return time.monotonic()

    # -- allocation, the kubelet's way -----------------------------------------------------

    def options(self) -> api_pb2.DevicePluginOptions:
        return self.plugin().GetDevicePluginOptions(api_pb2.Empty(), timeout=5)

    def preferred(self, available: Sequence[str], must_include: Sequence[str],
                  size: int) -> list[str]:
        response = self.plugin().GetPreferredAllocation(
            api_pb2.PreferredAllocationRequest(container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available),
                    must_include_deviceIDs=list(must_include), allocation_size=size)]),
            timeout=10)
        return list(response.container_responses[0].deviceIDs)

    def allocate(self, *device_ids: Sequence[str]) -> api_pb2.AllocateResponse:
        return self.plugin().Allocate(api_pb2.AllocateRequest(container_requests=[
            api_pb2.ContainerAllocateRequest(devices_ids=list(ids)) for ids in device_ids]),
            timeout=10)

    def choose(self, count: int, reusable: Sequence[str] = ()) -> list[str]:
        """The device IDs the kubelet would give a container asking for ``count``."""
        if len(reusable) >= count:
            return list(reusable)[:count]
        available = [i for i in self.devices().healthy_ids() if i not in self.allocated]
        if len(available) < count:
            raise RuntimeError(f"kubelet: {count} devices wanted, {len(available)} available")
        chosen: list[str] = []
        if len(available) > count and self.options().get_preferred_allocation_available:
            chosen = [i for i in self.preferred(available, [], count) if i in available]
        chosen += [i for i in available if i not in chosen][:count - len(chosen)]
        return chosen[:count]

    def admit_container(self, count: int,
                        reusable: Sequence[str] = ()) -> tuple[list[str],
                                                              api_pb2.ContainerAllocateResponse]:
        ids = self.choose(count, reusable)
        response = self.allocate(ids)
        self.allocated.update(ids)
        return ids, response.container_responses[0]

    def admit_pod(self, counts: Sequence[int], init_counts: Sequence[int] = ()
                  ) -> list[api_pb2.ContainerAllocateResponse]:
        """Allocate a pod's GPU containers one Allocate call each, init containers first;
        app containers reuse init containers' devices as the kubelet does."""
        responses = []
        reusable: list[str] = []
        for count in init_counts:
            ids, response = self.admit_container(count, reusable)
            reusable = list(dict.fromkeys([*reusable, *ids]))
            responses.append(response)
        for count in counts:
            ids, response = self.admit_container(count, reusable)
            reusable = [i for i in reusable if i not in ids]
            responses.append(response)
        return responses

    def release(self, ids: Sequence[str]) -> None:
        self.allocated.difference_update(ids)
