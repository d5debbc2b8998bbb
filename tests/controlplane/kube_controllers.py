"""kube-controller-manager v1.20.2 (``build.sh kube-controller-manager``), running only
the controllers a test names, on a control plane of that test's own.

    with ControlPlane() as cp, KubeControllers(cp, ("resourcequota", "replicaset")):
        ...  # quotas get their status and `used`, ReplicaSets create their pods

The shared e2e control plane has no controller-manager on purpose (tests there assert on
objects no controller touches; a ReplicaSet controller would start creating pods for the
ReplicaSets earlier tests left behind), so a test that needs one starts its own control
plane. The controllers act with the admin kubeconfig (no ServiceAccount tokens, so no
token controller is needed), without leader election; ``/healthz`` is served on a free
loopback port with a self-signed certificate.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from tests.controlplane.binaries import ControlPlaneError, ensure_kube_controller_manager
from tests.controlplane.control_plane import ControlPlane
from tests.controlplane.processes import ChildProcess, ExitedEarly, free_port, wait_until


class KubeControllers:
    def __init__(self, cp: ControlPlane, controllers: Sequence[str], *,
                 extra_args: Sequence[str] = (), startup_timeout: float = 60.0,
                 binary: Path | None = None) -> None:
        if not controllers:
            raise ValueError("name at least one controller")
        self.cp = cp
        self.controllers = tuple(controllers)
        self._extra = list(extra_args)
        self._timeout = startup_timeout
        self.binary = binary or ensure_kube_controller_manager()
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

    def __enter__(self) -> KubeControllers:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def argv(self) -> list[str]:
        return [str(self.binary), f"--kubeconfig={self.cp.kubeconfig}",
                f"--controllers={','.join(self.controllers)}", "--leader-elect=false",
                "--bind-address=127.0.0.1", f"--secure-port={self.port}", "--port=0",
                f"--cert-dir={self.workdir / 'pki'}",
                "--authorization-always-allow-paths=/healthz", "--profiling=false",
                "--v=2", *self._extra]

    def start(self) -> None:
        for _attempt in range(3):  # a port picked here can be taken before it binds
            self.port = free_port()
            self._proc = ChildProcess("kube-controller-manager", self.argv(), self.log_path)
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
