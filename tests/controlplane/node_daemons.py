"""containerd's config and the kubelet's flags for a real node in the tests (pure).

Why each unusual setting is there, measured on the CI machines (Firecracker VMs, root,
cgroup v1, no swap, ``CAP_SYS_RESOURCE`` not in the bounding set):

* ``restrict_oom_score_adj``: containerd gives a sandbox ``oom_score_adj=-998``, and
  without ``CAP_SYS_RESOURCE`` nobody may lower a score: runc then fails every sandbox with
  "can't get final child's PID from pipe: EOF". Restricted, scores are clamped to
  containerd's own (0).
* ``--cgroups-per-qos=false --enforce-node-allocatable=``: no ``kubepods`` hierarchy,
  which another kubelet on the same machine would share (a kubelet removes pod cgroups it
  does not know); each container gets containerd's ``/k8s.io/<id>``, which
  :class:`tests.controlplane.real_node.RealNode` removes by id when it stops.
* ``--protect-kernel-defaults``: the kubelet checks its kernel settings instead of writing
  them; the node's namespace shows it the values it wants (``node_init``).
* ``--make-iptables-util-chains=false``: the host's firewall is not ours to touch.
* ``--image-gc-high-threshold=100``, ``--eviction-hard=``: the imported images cannot be
  pulled again, and a busy shared disk must not evict the tests' pods.
* ``--anonymous-auth=false --client-ca-file``: the kubelet serves on the machine's address
  (a node IP may not be loopback, and ``kubectl logs`` reaches the kubelet there), so only
  holders of the test CA (the API server's kubelet client certificate) get in.
* no CNI configuration: pods use ``hostNetwork``; the node's Ready condition stays False
  with "cni plugin not initialized", which neither scheduler looks at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.controlplane.binaries import NodeBinaries
from tests.controlplane.images import PAUSE

#: The kernel settings the 1.20 kubelet insists on (``setupKernelTunables``), shown to it
#: inside the node's namespace instead of set on the host.
KUBELET_SYSCTLS = {
    "vm.overcommit_memory": "1",
    "vm.panic_on_oom": "0",
    "kernel.panic": "10",
    "kernel.panic_on_oops": "1",
    "kernel.keys.root_maxkeys": "1000000",
    "kernel.keys.root_maxbytes": "25000000",
}

#: The paths the 1.20 kubelet does not take from its flags.
DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
POD_LOGS = "/var/log/pods"
#: Where a DaemonSet finds the pod-resources socket of a kubelet at the default root
#: (``--root-dir`` moves it; a node running vgpu's DaemonSet binds it here).
POD_RESOURCES = "/var/lib/kubelet/pod-resources"


@dataclass(frozen=True)
class NodeLayout:
    """One node's folders and sockets (short paths: a socket path has 107 bytes at most)."""

    root: Path

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd.toml"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def device_plugins(self) -> Path:
        """Bound at the kubelet's fixed device-plugin folder; the agent uses this path."""
        return self.root / "device-plugins"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_root / "pod-resources" / "kubelet.sock"

    @property
    def tasks(self) -> Path:
        """containerd's task folders, one per container that may still have a cgroup."""
        return self.root / "containerd" / "state" / "io.containerd.runtime.v2.task" / "k8s.io"

    @property
    def images(self) -> Path:
        return self.root / "images.tar"


def containerd_config(layout: NodeLayout, binaries: NodeBinaries) -> str:
    root = layout.root
    return f"""\
version = 2
root = "{root}/containerd/root"
state = "{root}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{layout.containerd_socket}"

[ttrpc]
  address = "{layout.containerd_socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{binaries.runc}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{root}/cni/bin"
    conf_dir = "{root}/cni/net.d"
"""


@dataclass(frozen=True)
class KubeletSettings:
    name: str
    node_ip: str
    port: int
    healthz_port: int
    kubeconfig: Path
    client_ca: Path
    labels: tuple[tuple[str, str], ...] = ()


def kubelet_args(binaries: NodeBinaries, layout: NodeLayout,
                 s: KubeletSettings) -> list[str]:
    endpoint = f"unix://{layout.containerd_socket}"
    labels = ",".join(f"{k}={v}" for k, v in s.labels)
    return [
        str(binaries.kubelet),
        f"--kubeconfig={s.kubeconfig}",
        f"--hostname-override={s.name}",
        f"--node-ip={s.node_ip}",
        f"--address={s.node_ip}",
        f"--port={s.port}",
        "--read-only-port=0",
        "--healthz-bind-address=127.0.0.1",
        f"--healthz-port={s.healthz_port}",
        "--anonymous-auth=false",
        f"--client-ca-file={s.client_ca}",
        "--authorization-mode=AlwaysAllow",
        f"--root-dir={layout.kubelet_root}",
        f"--cert-dir={layout.kubelet_root}/pki",
        f"--volume-plugin-dir={layout.root}/volume-plugins",
        "--container-runtime=remote",
        f"--container-runtime-endpoint={endpoint}",
        f"--image-service-endpoint={endpoint}",
        f"--containerd={layout.containerd_socket}",
        f"--pod-infra-container-image={PAUSE}",
        "--cgroup-driver=cgroupfs",
        "--cgroups-per-qos=false",
        "--enforce-node-allocatable=",
        "--fail-swap-on=false",
        "--protect-kernel-defaults=true",
        "--make-iptables-util-chains=false",
        "--image-gc-high-threshold=100",
        "--image-gc-low-threshold=99",
        "--eviction-hard=",
        # Device-plugin capacity reaches the Node at the next status update.
        "--node-status-update-frequency=1s",
        "--sync-frequency=5s",
        *([f"--node-labels={labels}"] if labels else []),
        "--v=2",
    ]
