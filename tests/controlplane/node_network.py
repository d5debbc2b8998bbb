"""A node's own network: a network namespace joined to the host by a veth pair.

A cluster whose pods have their own addresses (:mod:`tests.controlplane.real_cluster`)
needs a bridge, per-pod routes and kube-proxy's iptables rules. On a machine that other
test runs share, none of that may touch the host's network: the node's daemons run in a
network namespace of their own (``NodeNamespace(network=True)``), where the CNI bridge
``cni0`` and kube-proxy's rules live and die with it. The host gets one veth end and one
route, both gone when the namespace ends.

Each node takes one /24 of 100.64.0.0/10 (shared address space, routed nowhere), picked
at random among those the host does not route yet:

* ``.0/30``: the link; the host's end is ``.1`` (the apiserver is reached there), the
  node's ``.2`` (the kubelet's address, its ``InternalIP``);
* ``.64/26``: the cluster's Service IPs, ``.65`` the ``kubernetes`` Service's;
* ``.128/25``: the pods' addresses (CNI ``host-local``), ``.129`` the bridge's.

The host routes the whole /24 to the node, so its processes (the apiserver calling a
webhook's Service, proxying to a pod) reach Service IPs through the node's kube-proxy and
pods directly, as on a node of a real cluster.
"""

from __future__ import annotations

import ipaddress
import json
import random
import secrets
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from tests.controlplane.binaries import ControlPlaneError

SHARED_SPACE = ipaddress.ip_network("100.64.0.0/10")
#: The node's end of the link, inside its namespace.
NODE_INTERFACE = "eth0"
BRIDGE = "cni0"


@dataclass(frozen=True)
class NodeNetwork:
    block: ipaddress.IPv4Network
    #: The host's end of the veth pair (at most 15 characters, unique on the host).
    host_interface: str

    def _at(self, offset: int) -> str:
        return str(self.block.network_address + offset)

    @property
    def host_ip(self) -> str:
        return self._at(1)

    @property
    def node_ip(self) -> str:
        return self._at(2)

    @property
    def link_prefix(self) -> int:
        return 30

    @property
    def service_cidr(self) -> str:
        return f"{self._at(64)}/26"

    @property
    def pod_cidr(self) -> str:
        return f"{self._at(128)}/25"


def cni_config(net: NodeNetwork) -> str:
    """The node's CNI network: one bridge, host-local addresses, no masquerade (the host
    routes the pods' range back to the node)."""
    return json.dumps({
        "cniVersion": "0.4.0",
        "name": "vgpu-e2e",
        "plugins": [{
            "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
            # A pod reaching a Service whose endpoint is itself comes back over its own
            # port (kube-proxy's hairpin case).
            "hairpinMode": True,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": net.pod_cidr}]],
                     "routes": [{"dst": "0.0.0.0/0"}]},
        }],
    }, indent=2)


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


def _check(argv: Sequence[str]) -> str:
    result = _run(argv)
    if result.returncode != 0:
        raise ControlPlaneError(f"{' '.join(argv)}: {result.stderr.strip()}")
    return result.stdout


def _taken() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the host routes or has an address in."""
    out = []
    for line in _check(["ip", "-4", "route", "show", "table", "all"]).splitlines() + \
            _check(["ip", "-4", "-o", "addr", "show"]).splitlines():
        for word in line.split():
            try:
                out.append(ipaddress.ip_network(word, strict=False))
            except ValueError:
                continue
    return [n for n in out if isinstance(n, ipaddress.IPv4Network)]


def allocate(rng: random.Random | None = None) -> NodeNetwork:
    """A /24 of the shared space that nothing on the host uses yet."""
    pick = rng or random.Random(secrets.randbits(64))
    taken = [n for n in _taken() if n.overlaps(SHARED_SPACE) and n.prefixlen > 0]
    blocks = 1 << (24 - SHARED_SPACE.prefixlen)
    for _attempt in range(100):
        block = ipaddress.IPv4Network(
            (int(SHARED_SPACE.network_address) + pick.randrange(blocks) * 256, 24))
        if not any(block.overlaps(n) for n in taken):
            return NodeNetwork(block, f"vn{secrets.token_hex(4)}")
    raise ControlPlaneError(f"no free /24 in {SHARED_SPACE} on this host")


def attach(net: NodeNetwork, pid: int) -> None:
    """Join the network namespace of ``pid`` to the host: the veth pair, the addresses,
    the routes, and forwarding inside the namespace (it routes between the link and the
    pods' bridge)."""
    inside = ["nsenter", f"--target={pid}", "--net", "--"]
    _check(["ip", "link", "add", net.host_interface, "type", "veth", "peer", "name",
            NODE_INTERFACE, "netns", str(pid)])
    _check(["ip", "addr", "add", f"{net.host_ip}/{net.link_prefix}", "dev",
            net.host_interface])
    _check(["ip", "link", "set", net.host_interface, "up"])
    for argv in (["ip", "link", "set", "lo", "up"],
                 ["ip", "addr", "add", f"{net.node_ip}/{net.link_prefix}", "dev",
                  NODE_INTERFACE],
                 ["ip", "link", "set", NODE_INTERFACE, "up"],
                 ["ip", "route", "add", "default", "via", net.host_ip],
                 ["sysctl", "-qw", "net.ipv4.ip_forward=1"]):
        _check([*inside, *argv])
    # Bridged traffic through iptables: kube-proxy's rules then also see a pod reaching a
    # Service whose endpoint is on the same bridge. Absent without br_netfilter.
    _run([*inside, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"])
    _check(["ip", "route", "add", str(net.block), "via", net.node_ip, "dev",
            net.host_interface])


def detach(net: NodeNetwork) -> None:
    """Remove the host's end (and with it the node's end and the route), if the
    namespace's end did not already take it along."""
    result = _run(["ip", "link", "show", net.host_interface])
    if result.returncode == 0:
        _run(["ip", "link", "delete", net.host_interface])
