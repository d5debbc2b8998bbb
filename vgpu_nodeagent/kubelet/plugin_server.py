"""Serving the device plugin on its socket and staying registered with the kubelet.

The plugin serves first and registers second (the kubelet calls back at once). A kubelet
restart deletes every socket in the device-plugin folder and creates a new
``kubelet.sock``; :meth:`PluginServer.check`, called every ~100 ms, notices the plugin's
socket is gone or the kubelet's socket is a new file, serves again on a fresh socket and
registers again.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from vgpu import logs, loops
from vgpu_nodeagent.kubelet.device_plugin import OPTIONS, DevicePluginService
from vgpu_nodeagent.proto import api_pb2, api_pb2_grpc

_log = logs.get("vgpu.nodeagent.server")

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class PluginServer:
    def __init__(self, service: DevicePluginService, directory: str, endpoint: str,
                 resource_name: str, *, workers: int = 16,
                 register_timeout: float = 5.0) -> None:
        self._service = service
        self.directory = directory
        self.endpoint = endpoint
        self.resource_name = resource_name
        self.socket_path = os.path.join(directory, endpoint)
        self.kubelet_socket = os.path.join(directory, KUBELET_SOCKET)
        self._workers = workers
        self._register_timeout = register_timeout
        self._server: grpc.Server | None = None
        self._socket_inode: int | None = None
        self._kubelet_inode: int | None = None
        self._failing = False
        self.registered = threading.Event()
        self.registrations = 0

    # -- serving ---------------------------------------------------------------------------

    def serve(self) -> None:
        """(Re)start the gRPC server on a fresh socket file."""
        self._stop_server()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        server = grpc.server(ThreadPoolExecutor(max_workers=self._workers,
                                                thread_name_prefix="device-plugin"))
        api_pb2_grpc.add_DevicePluginServicer_to_server(self._service, server)
        try:
            server.add_insecure_port(f"unix:{self.socket_path}")
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.socket_path}: {exc}") from None
        server.start()
        self._server = server
        self._socket_inode = _inode(self.socket_path)
        _log.info("serving the device plugin", socket=self.socket_path)

    def _stop_server(self) -> None:
        if self._server is not None:
            # Streams (ListAndWatch) end now; a kubelet restart has closed them anyway.
            self._server.stop(grace=None)
            self._server = None

    # -- registering -----------------------------------------------------------------------

    def register(self) -> bool:
        """Register with the kubelet; False (logged once per outage) when it is not there."""
        kubelet_inode = _inode(self.kubelet_socket)
        if kubelet_inode is None:
            self._note_failure("kubelet socket absent")
            return False
        request = api_pb2.RegisterRequest(version=API_VERSION, endpoint=self.endpoint,
                                          resource_name=self.resource_name, options=OPTIONS)
        try:
            with grpc.insecure_channel(f"unix:{self.kubelet_socket}") as channel:
                api_pb2_grpc.RegistrationStub(channel).Register(
                    request, timeout=self._register_timeout)
        except grpc.RpcError as exc:
            self._note_failure(f"{exc.code().name}: {exc.details()}")
            return False
        self._kubelet_inode = kubelet_inode
        self._failing = False
        self.registrations += 1
        self.registered.set()
        _log.info("registered with the kubelet", resource=self.resource_name,
                  endpoint=self.endpoint, registrations=self.registrations)
        return True

    def _note_failure(self, why: str) -> None:
        self.registered.clear()
        if not self._failing:
            _log.warning("cannot register with the kubelet yet; retrying", reason=why,
                         socket=self.kubelet_socket)
        self._failing = True

    # -- watching --------------------------------------------------------------------------

    def check(self) -> None:
        """Serve again if our socket went away; register again if the kubelet is new."""
        if _inode(self.socket_path) != self._socket_inode:
            _log.warning("device-plugin socket removed (kubelet restart?); serving again",
                         socket=self.socket_path)
            self.registered.clear()
            self.serve()
        kubelet_inode = _inode(self.kubelet_socket)
        if kubelet_inode is None:
            if self.registered.is_set():
                _log.warning("kubelet socket gone; waiting for the kubelet to come back")
            self.registered.clear()
            return
        if not self.registered.is_set() or kubelet_inode != self._kubelet_inode:
            self.register()

    def run(self, stop: threading.Event, interval: float = 0.1) -> None:
        while not stop.wait(interval):
            loops.survive("socket-watch", self.check)  # keep watching whatever one round did

    def stop(self) -> None:
        self._stop_server()
        try:
            if _inode(self.socket_path) == self._socket_inode:
                os.unlink(self.socket_path)
        except FileNotFoundError:
            pass
        self.registered.clear()
