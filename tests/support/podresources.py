"""A stand-in for the kubelet's pod-resources server (v1 ``List``) on a unix socket.

The node agent's tests set what it answers with :meth:`PodResourcesStandIn.set`; the
e2e tests read the real kubelet's instead (tests/e2e/test_real_node.py).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from vgpu_nodeagent.proto import podresources_pb2, podresources_pb2_grpc

#: (namespace, pod) -> container -> device IDs of the resource.
Listing = Mapping[tuple[str, str], Mapping[str, Sequence[str]]]


def response(listing: Listing, resource: str = "nvidia.com/gpu",
             ) -> podresources_pb2.ListPodResourcesResponse:
    pods = []
    for (namespace, name), containers in listing.items():
        pods.append(podresources_pb2.PodResources(
            name=name, namespace=namespace, containers=[
                podresources_pb2.ContainerResources(name=container, devices=[
                    podresources_pb2.ContainerDevices(resource_name=resource,
                                                      device_ids=list(ids))] if ids else [])
                for container, ids in containers.items()]))
    return podresources_pb2.ListPodResourcesResponse(pod_resources=pods)


class PodResourcesStandIn(podresources_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self._answer = podresources_pb2.ListPodResourcesResponse()
        self._lock = threading.Lock()
        self.calls = 0
        self._server: grpc.Server | None = None

    def set(self, listing: Listing, resource: str = "nvidia.com/gpu") -> None:
        with self._lock:
            self._answer = response(listing, resource)

    def List(self, request: podresources_pb2.ListPodResourcesRequest,
             context: grpc.ServicerContext) -> podresources_pb2.ListPodResourcesResponse:
        with self._lock:
            self.calls += 1
            return self._answer

    def start(self) -> PodResourcesStandIn:
        server = grpc.server(ThreadPoolExecutor(max_workers=2))
        podresources_pb2_grpc.add_PodResourcesListerServicer_to_server(self, server)
        server.add_insecure_port(f"unix:{self.socket_path}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None
