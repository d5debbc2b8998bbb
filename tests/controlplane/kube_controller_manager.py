"""kube-controller-manager v1.20.2 (``build.sh cluster``) on a test control plane.

    with ControlPlane(...) as cp, ControllerManager(cp, binary) as kcm:
        ...  # Deployments get ReplicaSets and pods, Services Endpoints, Jobs run

The controllers a cluster needs to run what ``kubectl apply -k`` creates: Deployments,
ReplicaSets, DaemonSets, Jobs and CronJobs, Endpoints, ServiceAccounts and the
``kube-root-ca.crt`` ConfigMap in every namespace, garbage collection (a deleted
Deployment's ReplicaSets and pods), namespace deletion, the disruption budgets' status.
It runs with the admin kubeconfig, without leader election, every controller acting
under its own ServiceAccount (as kubeadm runs it), serving ``/healthz`` on a free
loopback port. Only the shared e2e control plane lacks it (tests/controlplane/README.md):
tests there assert on objects no controller touches.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import urllib.request
from pathlib import Path
from types import TracebackType

from tests.controlplane.binaries import ControlPlaneError
from tests.controlplane.control_plane import ControlPlane
from tests.controlplane.processes import ChildProcess, ExitedEarly, free_port, wait_until


def controller_manager_args(binary: Path, cp: ControlPlane, port: int,
                            cert_dir: Path) -> list[str]:
    wd = cp.workdir
    served_to = cp.served_to
    return [
        str(binary),
        f"--kubeconfig={cp.kubeconfig}",
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        # The token controller signs the controllers' tokens with the key the apiserver
        # verifies; the root CA goes into tokens and every namespace's kube-root-ca.crt.
        f"--service-account-private-key-file={wd / 'sa.key'}",
        f"--root-ca-file={wd / 'ca.crt'}",
        *([f"--service-cluster-ip-range={served_to.service_cidr}"] if served_to else []),
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--port=0",
        f"--cert-dir={cert_dir}",
        "--authorization-always-allow-paths=/healthz",
        "--profiling=false",
        "--v=2",
    ]


class ControllerManager:
    def __init__(self, cp: ControlPlane, binary: Path, *, startup_timeout: float = 60.0) -> None:
        self.cp = cp
        self.binary = binary
        self._timeout = startup_timeout
        self.workdir = Path(tempfile.mkdtemp(prefix="vgpu-kcm-"))
        self.port = 0
        self._proc: ChildProcess | None = None
        self._tls = ssl.create_default_context()
        # Its serving certificate is self-signed, made at start; only its health matters.
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE

    @property
    def log_path(self) -> Path:
        return self.workdir / "kube-controller-manager.log"

    def __enter__(self) -> ControllerManager:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        for _attempt in range(3):  # a port picked here can be taken before it binds
            self.port = free_port()
            self._proc = ChildProcess(
                "kube-controller-manager",
                controller_manager_args(self.binary, self.cp, self.port,
                                        self.workdir / "pki"), self.log_path)
            try:
                wait_until(self._proc, "kube-controller-manager /healthz", self._healthy,
                           self._timeout)
                return
            except ExitedEarly as exc:
                if "address already in use" not in exc.args[0]:
                    raise
                self._proc.stop()
        raise ControlPlaneError("kube-controller-manager lost its port three times")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/healthz", timeout=2,
                                        context=self._tls) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    def log_tail(self, lines: int = 40) -> str:
        return self._proc.log_tail(lines) if self._proc is not None else ""

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
            self._proc = None
        if not os.environ.get("VGPUDEV_KEEP_E2E"):
            shutil.rmtree(self.workdir, ignore_errors=True)
