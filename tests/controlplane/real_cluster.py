"""A minimal real Kubernetes 1.20 cluster: what ``kubectl apply -k`` of vgpu needs to run.

    with RealCluster() as cluster:
        cluster.kubectl("apply", "-k", folder)    # the control plane's own kubectl
        cluster.node.ctr("images", "import", archive)

On top of the e2e control plane (etcd, kube-apiserver): kube-controller-manager with every
controller (:class:`KubeControllers`), kube-scheduler as the default scheduler (no leader
election), and one :class:`ClusterNode`: a kubelet with containerd,
a CNI bridge and kube-proxy in a network namespace of its own. Pods get addresses, reach
the apiserver at the ``kubernetes`` Service, and the apiserver reaches Services (a
webhook's) through the node's kube-proxy, the way a control-plane machine does. The Node
is created by its kubelet, without labels: labelling it is the operator's step.

Everything it runs is built (or found in the cache) in the constructor, before any
start-up is timed. It has a control plane of its own: the controllers must not run on the
shared one, whose tests count on objects nobody else changes.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import kubernetes.client

from tests.controlplane.binaries import (
    ControlPlaneError,
    ensure_binaries,
    ensure_kube_controller_manager,
    ensure_kube_scheduler,
    ensure_node_binaries,
    ensure_pod_network,
)
from tests.controlplane.cluster_node import ClusterNode
from tests.controlplane.control_plane import ControlPlane
from tests.controlplane.daemons import ServedTo
from tests.controlplane.kube_controllers import KubeControllers
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.controlplane.node_network import allocate


def controller_args(cp: ControlPlane) -> list[str]:
    """Every controller's extra flags: each controller acts under its own ServiceAccount
    (as kubeadm runs them, so the bootstrap RBAC policy is what they get), the token
    controller signs with the key the apiserver verifies, the root CA goes into every
    namespace's ``kube-root-ca.crt`` (which a pod's service-account volume mounts), and the
    Service range is the apiserver's."""
    served_to = cp.served_to
    return ["--use-service-account-credentials=true",
            f"--service-account-private-key-file={cp.workdir / 'sa.key'}",
            f"--root-ca-file={cp.workdir / 'ca.crt'}",
            *([f"--service-cluster-ip-range={served_to.service_cidr}"] if served_to else [])]


class RealCluster:
    def __init__(self, node_name: str = "node-a", *, startup_timeout: float = 180.0) -> None:
        self.node_name = node_name
        self._timeout = startup_timeout
        binaries = ensure_binaries()
        self._node_binaries = ensure_node_binaries()
        self._pod_network = ensure_pod_network()
        self._kcm_binary = ensure_kube_controller_manager()
        self._scheduler_binary = ensure_kube_scheduler()
        self.network = allocate()
        self.cp = ControlPlane(binaries=binaries, startup_timeout=startup_timeout,
                               served_to=ServedTo(self.network.host_ip,
                                                  self.network.service_cidr))
        self._kcm: KubeControllers | None = None
        self._scheduler: KubeScheduler | None = None
        self._node: ClusterNode | None = None
        self.startup_seconds = 0.0

    @property
    def node(self) -> ClusterNode:
        if self._node is None:
            raise ControlPlaneError("the cluster is not running")
        return self._node

    def kubectl(self, *args: str, check: bool = True, input_text: str | None = None,
                timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl(*args, check=check, input_text=input_text, timeout=timeout)

    def __enter__(self) -> RealCluster:
        try:
            self.start()
        except BaseException:
            logs = self.logs()
            self.stop()
            raise ControlPlaneError(f"the cluster did not start; logs:\n{logs}") from None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        began = time.monotonic()
        self.cp.start()
        self._kcm = KubeControllers(self.cp, ("*",), extra_args=controller_args(self.cp),
                                    binary=self._kcm_binary)
        self._kcm.start()
        self._scheduler = KubeScheduler(self.cp, binary=self._scheduler_binary)
        self._scheduler.start()
        self._node = ClusterNode(self.cp, self.node_name, self.network,
                                 pod_network=self._pod_network, binaries=self._node_binaries,
                                 startup_timeout=self._timeout)
        self._node.start()
        self._wait("the Node Ready and the default ServiceAccount made", self._ready)
        self.startup_seconds = time.monotonic() - began

    def _ready(self) -> bool:
        with self.cp.api_client() as client:
            core = kubernetes.client.CoreV1Api(client)
            try:
                node = core.read_node(self.node_name)
                core.read_namespaced_service_account("default", "kube-system")
            except kubernetes.client.ApiException:
                return False
        conditions = (node.status.conditions if node.status else None) or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def _wait(self, what: str, probe: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self._timeout
        while not probe():
            for name, alive in (("kube-controller-manager", self._kcm and self._kcm.alive()),
                                ("kube-scheduler", self._scheduler and self._scheduler.alive())):
                if not alive:
                    raise ControlPlaneError(f"{name} exited before {what}")
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{what}: not within {self._timeout:.0f} s")
            time.sleep(0.5)

    def stop(self) -> None:
        if self._node is not None:
            self._node.stop()
            self._node = None
        for daemon in (self._scheduler, self._kcm):
            if daemon is not None:
                daemon.stop()
        self._scheduler = self._kcm = None
        self.cp.stop()

    def logs(self, lines: int = 40) -> str:
        out = []
        if self._node is not None:
            out.append(self._node.logs(lines))
        for name, daemon in (("kube-controller-manager", self._kcm),
                             ("kube-scheduler", self._scheduler)):
            if daemon is not None:
                out.append(f"----- {name} -----\n{daemon.log_tail(lines)}")
        with contextlib.suppress(ControlPlaneError, OSError):
            tail = Path(self.cp.apiserver_log).read_text(errors="replace").splitlines()
            out.append("----- kube-apiserver -----\n" + "\n".join(tail[-lines:]))
        return "\n".join(out)
