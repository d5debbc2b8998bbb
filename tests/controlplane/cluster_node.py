"""A real node with pod networking: :class:`RealNode` in a network namespace of its own,
with a CNI bridge and kube-proxy (:mod:`tests.controlplane.real_cluster` runs it).

    with ClusterNode(cp, "node-a", network, pod_network=ensure_pod_network()) as node:
        ...  # pods get addresses of network.pod_cidr; Service IPs work on the node

What it adds to :class:`RealNode`, so that manifests written for a real cluster run
unchanged (no ``hostNetwork``, in-cluster clients at the ``kubernetes`` Service):

* its namespaces include a network namespace, joined to the host by a veth pair
  (:mod:`tests.controlplane.node_network`); the kubelet serves at the node's end
  (``InternalIP``) and reaches the apiserver at the host's end, through a kubeconfig of
  its own;
* containerd's CNI folders hold the bridge, host-local and loopback plugins and a
  configuration of one bridge, so the Node turns Ready;
* kube-proxy (iptables mode) runs in the namespace: the pods reach the apiserver at the
  ``kubernetes`` Service's IP, and the host, which routes the Service range to the node,
  reaches any Service (the apiserver calling a webhook) through it;
* the kubelet's pod-resources folder is bound at ``/var/lib/kubelet/pod-resources``,
  where a DaemonSet's ``hostPath`` names it.

kube-proxy does without what this machine does not allow or share: no conntrack table
sizes (global, the host's), no ``oom_score_adj`` (no ``CAP_SYS_RESOURCE``).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.controlplane.binaries import ControlPlaneError, NodeBinaries, PodNetworkBinaries
from tests.controlplane.control_plane import ControlPlane
from tests.controlplane.node_daemons import (
    DEVICE_PLUGINS,
    KUBELET_SYSCTLS,
    POD_LOGS,
    POD_RESOURCES,
)
from tests.controlplane.node_namespace import NodeNamespace
from tests.controlplane.node_network import NodeNetwork, attach, cni_config, detach
from tests.controlplane.pki import write_kubeconfig
from tests.controlplane.processes import ChildProcess, wait_until
from tests.controlplane.real_node import RealNode

CNI_PLUGINS = ("bridge", "host-local", "loopback")


def kube_proxy_args(kube_proxy: Path, kubeconfig: Path, name: str,
                    net: NodeNetwork) -> list[str]:
    return [
        str(kube_proxy),
        f"--kubeconfig={kubeconfig}",
        f"--hostname-override={name}",
        "--proxy-mode=iptables",
        # Traffic to a Service from outside the pods' range (the host) is masqueraded,
        # so the answer comes back through the node.
        f"--cluster-cidr={net.pod_cidr}",
        # 0: leave the kernel's value. The conntrack table's size is the host's (global),
        # and raising an oom_score_adj needs CAP_SYS_RESOURCE, which these VMs lack.
        "--conntrack-max-per-core=0",
        "--conntrack-tcp-timeout-established=0",
        "--conntrack-tcp-timeout-close-wait=0",
        "--oom-score-adj=0",
        # Ports in the node's own network namespace: no other test can hold them.
        "--healthz-bind-address=127.0.0.1:10256",
        "--metrics-bind-address=127.0.0.1:10249",
        "--v=2",
    ]


class ClusterNode(RealNode):
    def __init__(self, cp: ControlPlane, name: str, network: NodeNetwork, *,
                 pod_network: PodNetworkBinaries, labels: Mapping[str, str] | None = None,
                 startup_timeout: float = 120.0, binaries: NodeBinaries | None = None) -> None:
        if shutil.which("iptables") is None:
            raise ControlPlaneError("kube-proxy needs iptables on this machine "
                                    "(apt-get install iptables; buildah depends on it)")
        super().__init__(cp, name, labels=labels, startup_timeout=startup_timeout,
                         binaries=binaries)
        self.network = network
        self.pod_network = pod_network
        self.namespace = NodeNamespace(
            self.layout.root,
            {DEVICE_PLUGINS: self.layout.device_plugins, POD_LOGS: self.layout.pod_logs,
             POD_RESOURCES: self.layout.kubelet_root / "pod-resources"},
            KUBELET_SYSCTLS, network=True)
        self.settings = dataclasses.replace(self.settings, node_ip=network.node_ip,
                                            kubeconfig=self.layout.root / "node.kubeconfig")
        self.kube_proxy: ChildProcess | None = None

    def start(self) -> None:
        super().start()
        self._start_kube_proxy()

    def stop(self, *, delete_node: bool = True) -> None:
        if self.kube_proxy is not None:
            self.kube_proxy.stop(timeout=5)
            self.kube_proxy = None
        super().stop(delete_node=delete_node)
        detach(self.network)

    def _start_containerd(self) -> None:
        # The namespace is up (its init's pid is known); containerd reads the CNI
        # configuration once it starts.
        attach(self.network, self.namespace.init_pid)
        port = self.cp.server.rsplit(":", 1)[1]
        write_kubeconfig(self.settings.kubeconfig, f"https://{self.network.host_ip}:{port}",
                         self.cp.workdir)
        plugins = self.pod_network.cni_dir
        for plugin in CNI_PLUGINS:
            (self.layout.root / "cni" / "bin" / plugin).symlink_to(plugins / plugin)
        (self.layout.root / "cni" / "net.d" / "10-vgpu-e2e.conflist").write_text(
            cni_config(self.network))
        super()._start_containerd()

    def _start_kube_proxy(self) -> None:
        self.kube_proxy = ChildProcess(
            "kube-proxy", self.namespace.enter(kube_proxy_args(
                self.pod_network.kube_proxy, self.settings.kubeconfig, self.name, self.network)),
            self.layout.root / "kube-proxy.log")
        served_to = self.cp.served_to
        if served_to is None:
            raise ControlPlaneError("a ClusterNode needs a ControlPlane with served_to set")
        service_ip = served_to.kubernetes_service_ip
        wait_until(self.kube_proxy, f"kube-proxy's rules for {service_ip}",
                   lambda: service_ip in self.iptables_nat(), self._timeout)

    def iptables_nat(self) -> str:
        """The node's NAT rules (kube-proxy's Services), as ``iptables-save`` prints them."""
        result = subprocess.run(
            ["nsenter", f"--target={self.namespace.init_pid}", "--net", "--",
             "iptables-save", "-t", "nat"], capture_output=True, text=True, timeout=30,
            check=False)
        return result.stdout

    def logs(self, lines: int = 40) -> str:
        text = super().logs(lines)
        path = self.layout.root / "kube-proxy.log"
        try:
            tail = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return text
        return text + f"\n----- {self.name} kube-proxy.log -----\n" + "\n".join(tail)
