"""kube-scheduler v1.20.2 (``build.sh kube-scheduler``) on the test control plane.

    with ControlPlane() as cp, KubeScheduler(cp, scheduler_name="kube-a") as ks:
        ...  # pods with spec.schedulerName "kube-a" are bound by the real kube-scheduler
        ks.metrics()                        # its /metrics text

The reference implementation that vgpu-scheduler's parity is measured against, and the
baseline of its speed. It reads a ``KubeSchedulerConfiguration`` (v1beta1, the 1.20
version) with one profile named ``scheduler_name``; ``profile`` adds to that profile
(``plugins``, ``pluginConfig``) and ``extra_args`` to its flags. It runs with the admin
kubeconfig, without leader election unless ``leader_election`` gives the fields of its
``leaderElection`` (``resourceName``, ``leaseDuration``, ...; the lock is a Lease),
serving ``/healthz`` and ``/metrics`` on a free loopback port without authentication.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import tempfile
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.controlplane.binaries import ControlPlaneError, ensure_kube_scheduler
from tests.controlplane.control_plane import ControlPlane
from tests.controlplane.processes import ChildProcess, ExitedEarly, free_port, wait_until

CONFIG_API = "kubescheduler.config.k8s.io/v1beta1"


def scheduler_config(kubeconfig: Path, scheduler_name: str,
                     profile: Mapping[str, Any] | None = None,
                     insecure_port: int | None = None,
                     leader_election: Mapping[str, Any] | None = None) -> dict[str, Any]:
    election = ({"leaderElect": True, "resourceLock": "leases", **leader_election}
                if leader_election is not None else {"leaderElect": False})
    config = {"apiVersion": CONFIG_API, "kind": "KubeSchedulerConfiguration",
              "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 1000,
                                   "burst": 2000},
              "leaderElection": election,
              "profiles": [{"schedulerName": scheduler_name, **(profile or {})}]}
    if insecure_port is not None:
        # The config file's insecure healthz/metrics address wins over --port=0, and its
        # default, 0.0.0.0:10251, is taken by any other kube-scheduler on the machine.
        address = f"127.0.0.1:{insecure_port}"
        config.update(healthzBindAddress=address, metricsBindAddress=address)
    return config


class KubeScheduler:
    def __init__(self, cp: ControlPlane, *, scheduler_name: str = "default-scheduler",
                 profile: Mapping[str, Any] | None = None, extra_args: Sequence[str] = (),
                 startup_timeout: float = 60.0, binary: Path | None = None,
                 leader_election: Mapping[str, Any] | None = None) -> None:
        self.cp = cp
        self.scheduler_name = scheduler_name
        self._profile = dict(profile or {})
        self._election = dict(leader_election) if leader_election is not None else None
        self._extra = list(extra_args)
        self._timeout = startup_timeout
        self.binary = binary or ensure_kube_scheduler()
        self.workdir = Path(tempfile.mkdtemp(prefix="vgpu-kube-scheduler-"))
        self.port = 0
        self._proc: ChildProcess | None = None
        self._tls = ssl.create_default_context()
        # Its serving certificate is self-signed, made at start; only its health matters.
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE

    @property
    def log_path(self) -> Path:
        return self.workdir / "kube-scheduler.log"

    def __enter__(self) -> KubeScheduler:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        config = self.workdir / "config.json"
        for _attempt in range(3):  # a port picked here can be taken before it binds
            self.port = free_port()
            config.write_text(json.dumps(scheduler_config(
                self.cp.kubeconfig, self.scheduler_name, self._profile, free_port(),
                self._election)))
            self._proc = ChildProcess("kube-scheduler", [
                str(self.binary), f"--config={config}", "--bind-address=127.0.0.1",
                f"--secure-port={self.port}", "--port=0",
                f"--cert-dir={self.workdir / 'pki'}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--v=2", *self._extra], self.log_path)
            try:
                wait_until(self._proc, "kube-scheduler /healthz", self._healthy, self._timeout)
                return
            except ExitedEarly as exc:
                if "address already in use" not in exc.args[0]:
                    raise
                self._proc.stop()
        raise ControlPlaneError("kube-scheduler lost its port three times")

    def _get(self, path: str) -> str | None:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}{path}", timeout=2,
                                        context=self._tls) as reply:
                return str(reply.read().decode()) if reply.status == 200 else None
        except OSError:
            return None

    def _healthy(self) -> bool:
        return self._get("/healthz") == "ok"

    def metrics(self) -> str:
        text = self._get("/metrics")
        if text is None:
            raise ControlPlaneError(f"kube-scheduler /metrics did not answer; log tail:\n"
                                    f"{self.log_tail()}")
        return text

    @property
    def pid(self) -> int:
        """The process's id (for its CPU time in bench/bind.py)."""
        if self._proc is None:
            raise ControlPlaneError("kube-scheduler is not running")
        pid: int = self._proc.popen.pid
        return pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    def log_tail(self, lines: int = 40) -> str:
        return self._proc.log_tail(lines) if self._proc is not None else ""

    def kill(self) -> None:
        """SIGKILL: the process ends without a word (nothing given up, nothing flushed)."""
        if self._proc is not None:
            self._proc.popen.kill()
            self._proc.popen.wait(10)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
            self._proc = None
        if not os.environ.get("VGPUDEV_KEEP_E2E"):
            shutil.rmtree(self.workdir, ignore_errors=True)
