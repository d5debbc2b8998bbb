"""Host ports a pod asks for, and when two of them collide on a node (NodePorts).

A container port with ``hostPort`` binds that port on the node. Two bindings conflict
when their protocol and port are the same and their host IPs overlap: an empty or
``0.0.0.0`` host IP binds every address of the node, so it overlaps any other IP, as
kube-scheduler's ``HostPortInfo`` has it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.errors import RequestError
from vgpu.pods import containers

ANY_IP = "0.0.0.0"
PROTOCOLS = ("TCP", "UDP", "SCTP")


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    protocol: str
    ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return ANY_IP in (self.ip, other.ip) or self.ip == other.ip


def _port(raw: Any, where: str) -> HostPort | None:
    if not isinstance(raw, Mapping):
        raise RequestError(f"{where} must be a mapping")
    host_port = raw.get("hostPort")
    if host_port is None or host_port == 0:
        return None
    if isinstance(host_port, bool) or not isinstance(host_port, int) or not (
            0 < host_port < 65536):
        raise RequestError(f"{where}.hostPort {host_port!r} is not a port number")
    protocol = raw.get("protocol") or "TCP"
    if protocol not in PROTOCOLS:
        raise RequestError(f"{where}.protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    ip = raw.get("hostIP") or ANY_IP
    return HostPort(str(protocol), str(ip), host_port)


def _binds_none(pod: Mapping[str, Any]) -> bool:
    """Whether the pod, as decoded JSON, plainly binds no host port: every container a
    JSON object whose ports (if any) name none. Most pods, and every bound pod of a cold
    start is read (issue 40); anything else takes the full reading below."""
    spec = pod.get("spec")
    if type(spec) is not dict:
        return False
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if type(items) is not list:
            continue  # what the full reading skips too
        for container in items:
            if type(container) is not dict:
                return False
            ports = container.get("ports")
            if not ports:
                continue
            if type(ports) is not list:
                return False
            for port in ports:
                if type(port) is not dict or port.get("hostPort") not in (None, 0):
                    return False
    return True


def parse_host_ports(pod: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Every host port the pod's long-running containers bind: the app containers and the
    sidecars (init containers with ``restartPolicy: Always``); a plain init container
    has ended before they start, as kube-scheduler counts."""
    if _binds_none(pod):
        return ()
    out: list[HostPort] = []
    for ref in containers(pod):
        if not isinstance(ref.container, Mapping) or (ref.init and not ref.sidecar):
            continue
        ports = ref.container.get("ports") or []
        if not isinstance(ports, list):
            raise RequestError(f"spec.{ref.key}[{ref.position}].ports must be a list")
        for i, raw in enumerate(ports):
            found = _port(raw, f"spec.{ref.key}[{ref.position}].ports[{i}]")
            if found is not None:
                out.append(found)
    return tuple(sorted(set(out)))


def conflicting(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> HostPort | None:
    """The first wanted port that collides with one in use, or None."""
    taken = list(used)
    for port in wanted:
        if any(port.conflicts(u) for u in taken):
            return port
    return None
