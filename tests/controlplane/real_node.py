"""A real node on the test control plane: a kubelet v1.20.2 and containerd running pods.

    with ControlPlane() as cp, RealNode(cp, "node-a", labels={"gpu": "on"}) as node:
        node.plugin_dir             # where a device plugin serves and registers
        node.pod_resources_socket   # the kubelet's pod-resources API
        node.restart_kubelet()

Everything runs from ``build.sh node``'s binaries inside the node's own mount and PID
namespaces (:mod:`tests.controlplane.node_namespace`): containerd with its root, state and
socket in the node's folder, the images imported from a local OCI archive
(:mod:`tests.controlplane.images`; nothing is pulled), the kubelet registered with the
API server, with its root folder and ports of its own (flags and the reasons
for them in :mod:`tests.controlplane.node_daemons`). Pods must use ``hostNetwork: true``
(there is no CNI) and ``imagePullPolicy: Never``. :meth:`RealNode.stop` ends exactly the
node's processes, removes its cgroups and deletes its Node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import kubernetes.client

from tests.controlplane.binaries import ControlPlaneError, NodeBinaries, ensure_node_binaries
from tests.controlplane.control_plane import ControlPlane
from tests.controlplane.images import write_archive
from tests.controlplane.node_daemons import (
    DEVICE_PLUGINS,
    KUBELET_SYSCTLS,
    POD_LOGS,
    KubeletSettings,
    NodeLayout,
    containerd_config,
    kubelet_args,
)
from tests.controlplane.node_namespace import NodeNamespace, node_ip, remove_cgroups
from tests.controlplane.processes import ChildProcess, free_port, wait_until


class RealNode:
    def __init__(self, cp: ControlPlane, name: str, *, labels: Mapping[str, str] | None = None,
                 startup_timeout: float = 120.0, binaries: NodeBinaries | None = None) -> None:
        self.cp = cp
        self.name = name
        self.labels = dict(labels or {})
        self._timeout = startup_timeout
        self.binaries = binaries or ensure_node_binaries()
        # Short: socket paths must stay under 108 bytes.
        self.layout = NodeLayout(Path(tempfile.mkdtemp(prefix="vn-", dir="/tmp")))
        self.namespace = NodeNamespace(
            self.layout.root,
            {DEVICE_PLUGINS: self.layout.device_plugins, POD_LOGS: self.layout.pod_logs},
            KUBELET_SYSCTLS)
        self.containerd: ChildProcess | None = None
        self.kubelet: ChildProcess | None = None
        self.kubelet_starts = 0
        self._kubelet_pid: int | None = None
        self.settings = KubeletSettings(
            name=name, node_ip=node_ip(), port=0, healthz_port=0, kubeconfig=cp.kubeconfig,
            client_ca=cp.ca_cert,
            labels=tuple(sorted(self.labels.items())))
        self.startup_seconds = 0.0
        #: cgroups of this node's containers that :meth:`stop` could not remove.
        self.leftover_cgroups: list[str] = []

    # -- what tests use ------------------------------------------------------------------

    @property
    def plugin_dir(self) -> str:
        """The kubelet's device-plugin folder, as the host (and a device plugin) sees it."""
        return str(self.layout.device_plugins)

    @property
    def pod_resources_socket(self) -> str:
        return str(self.layout.pod_resources_socket)

    @property
    def kubelet_socket(self) -> Path:
        return self.layout.device_plugins / "kubelet.sock"

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> RealNode:
        try:
            self.start()
        except BaseException:
            logs = self.logs()
            self.stop()
            raise ControlPlaneError(f"real node {self.name} did not start; logs:\n{logs}") \
                from None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        began = time.monotonic()
        root = self.layout.root
        for folder in ("containerd", "cni/net.d", "cni/bin", "volume-plugins"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        self.layout.containerd_config.write_text(containerd_config(self.layout, self.binaries))
        write_archive(self.binaries.busybox, self.layout.images)
        self.namespace.start(self._timeout)
        self._start_containerd()
        self._import_images()
        self.start_kubelet()
        self.startup_seconds = time.monotonic() - began

    def stop(self, *, delete_node: bool = True) -> None:
        self.stop_kubelet()
        if self.containerd is not None:
            self.containerd.stop(timeout=5)
            self.containerd = None
        containers = [p.name for p in self.layout.tasks.glob("*")]
        self.namespace.stop()  # ends the shims and containers with it
        self.leftover_cgroups = remove_cgroups([f"k8s.io/{c}" for c in containers])
        if delete_node:
            with self.cp.api_client() as client, contextlib.suppress(
                    kubernetes.client.ApiException):
                kubernetes.client.CoreV1Api(client).delete_node(self.name)
        if not os.environ.get("KEEP_E2E"):
            shutil.rmtree(self.layout.root, ignore_errors=True)

    def _start_containerd(self) -> None:
        env = {**os.environ, "PATH": f"{self.binaries.bin_dir}:{os.environ.get('PATH', '')}"}
        self.containerd = ChildProcess(
            "containerd", self.namespace.enter(
                [str(self.binaries.containerd), "--config", str(self.layout.containerd_config)]),
            self.layout.root / "containerd.log", env=env)
        wait_until(self.containerd, "containerd's socket", self._containerd_up, self._timeout)

    def ctr(self, *args: str, timeout: float = 60.0) -> str:
        """``ctr -n k8s.io ARGS`` against this node's containerd (a client: runs outside)."""
        result = subprocess.run(
            [str(self.binaries.ctr), "--address", str(self.layout.containerd_socket),
             "--namespace", "k8s.io", *args],
            capture_output=True, text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise ControlPlaneError(f"ctr {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def _containerd_up(self) -> bool:
        if not self.layout.containerd_socket.exists():
            return False
        try:
            self.ctr("version", timeout=5)
        except ControlPlaneError:
            return False
        return True

    def _import_images(self) -> None:
        self.ctr("images", "import", str(self.layout.images))

    def start_kubelet(self) -> None:
        """Start the kubelet (again) and wait until it serves and its Node is current."""
        if self.kubelet is not None:
            raise ControlPlaneError("the kubelet is running")
        before = _identity(self.kubelet_socket)
        # Ports are picked here and bound by the kubelet: a retry covers a lost race.
        for _attempt in range(3):
            self.settings = dataclasses.replace(self.settings, port=free_port(),
                                                healthz_port=free_port())
            self.kubelet_starts += 1
            self.kubelet = ChildProcess(
                "kubelet", self.namespace.enter(kubelet_args(self.binaries, self.layout,
                                                             self.settings)),
                self.layout.root / f"kubelet-{self.kubelet_starts}.log")
            try:
                wait_until(self.kubelet, "the kubelet's sockets and Node",
                           lambda: self._kubelet_up(before), self._timeout)
                self._kubelet_pid = _only_child(self.kubelet.popen.pid)
                return
            except ControlPlaneError as exc:
                if self.kubelet.alive() or "address already in use" not in str(exc):
                    raise
                self.kubelet.stop()
                self.kubelet = None
        raise ControlPlaneError("the kubelet lost its ports three times")

    def _kubelet_up(self, socket_before: tuple[int, int] | None) -> bool:
        socket_now = _identity(self.kubelet_socket)
        if socket_now is None or socket_now == socket_before:
            return False  # a restart: wait for the new kubelet's registration socket
        if not self.layout.pod_resources_socket.exists():
            return False
        with self.cp.api_client() as client:
            try:
                node = kubernetes.client.CoreV1Api(client).read_node(self.name)
            except kubernetes.client.ApiException:
                return False
        # This kubelet, not the one before a restart, has written the Node's status.
        endpoints = node.status.daemon_endpoints if node.status else None
        endpoint = endpoints.kubelet_endpoint if endpoints else None
        return endpoint is not None and endpoint.port == self.settings.port

    def stop_kubelet(self) -> None:
        """Stop the kubelet and wait until it has exited: nsenter, the process we started,
        goes at once, while the kubelet it forked may still be on its way out."""
        if self.kubelet is not None:
            self.kubelet.stop(timeout=10)
            self.kubelet = None
        pid, self._kubelet_pid = self._kubelet_pid, None
        deadline = time.monotonic() + 10
        while pid is not None and _running(pid):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)

    def restart_kubelet(self) -> None:
        self.stop_kubelet()
        self.start_kubelet()

    def logs(self, lines: int = 40) -> str:
        out = []
        for name in ("namespace.log", "containerd.log", f"kubelet-{self.kubelet_starts}.log"):
            path = self.layout.root / name
            with contextlib.suppress(OSError):
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"----- {self.name} {name} -----\n" + "\n".join(tail))
        return "\n".join(out)


def _only_child(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if len(children) == 1 else None


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (the namespace's init reaps it soon)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _identity(path: Path) -> tuple[int, int] | None:
    """A file's inode and change time: a new file can get the inode number of a deleted
    one at once, so the number alone does not tell a restarted kubelet's socket."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_ctime_ns


