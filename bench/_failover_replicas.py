"""The replicas ``bench/failover.py`` kills: kube-scheduler v1.20.2 and `vgpu scheduler`,
each started with leader election on a Lease of the given settings, behind one interface
(start, wait until warm, SIGKILL, stop).

It imports the test helpers, so failover.py imports it once the repository is on
``sys.path``."""

from __future__ import annotations

import contextlib
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.e2e.scheduler_kube_support import SchedulerProcess

KUBE = "kube-scheduler"
VGPU = "vgpu-scheduler"
NAMESPACE = "failover"


@dataclass(frozen=True)
class Lease:
    """The election settings both schedulers get, and the Lease's name."""

    name: str
    duration: float
    renew_deadline: float
    retry_period: float


class Replica(Protocol):
    def warm(self, seconds: float) -> None:
        """Wait until its caches are synced (its informers listed)."""

    def leading(self) -> bool: ...

    def kill(self) -> None: ...

    def stop(self) -> None: ...


class KubeReplica:
    def __init__(self, cp: ControlPlane, scheduler_name: str, lease: Lease) -> None:
        self._ks = KubeScheduler(cp, scheduler_name=scheduler_name, leader_election={
            "resourceName": lease.name, "resourceNamespace": NAMESPACE,
            "leaseDuration": f"{lease.duration:g}s",
            "renewDeadline": f"{lease.renew_deadline:g}s",
            "retryPeriod": f"{lease.retry_period:g}s"})
        self._ks.start()  # returns once /healthz answers

    def warm(self, seconds: float) -> None:
        # kube-scheduler serves /healthz before its informers synced, and tells a follower
        # from a leader nowhere but in its log: synced once it says it tries the Lease
        # (it campaigns only after WaitForCacheSync).
        deadline = time.monotonic() + seconds
        while "attempting to acquire leader lease" not in self._ks.log_path.read_text():
            if time.monotonic() > deadline:
                raise SystemExit(f"kube-scheduler not synced in {seconds:g} s:\n"
                                 f"{self._ks.log_tail()}")
            time.sleep(0.05)

    def leading(self) -> bool:
        return "successfully acquired lease" in self._ks.log_path.read_text()

    def kill(self) -> None:
        self._ks.kill()

    def stop(self) -> None:
        self._ks.stop()


class VgpuReplica:
    def __init__(self, cp: ControlPlane, workdir: Path, scheduler_name: str, lease: Lease,
                 *, identity: str, write_timeout: float) -> None:
        self._proc = SchedulerProcess(
            cp, workdir, scheduler_name, "--leader-elect", f"--lease-name={lease.name}",
            f"--lease-namespace={NAMESPACE}", f"--lease-duration={lease.duration:g}",
            f"--renew-deadline={lease.renew_deadline:g}",
            f"--retry-period={lease.retry_period:g}", f"--identity={identity}",
            config={"scheduler": {"writeTimeoutSeconds": write_timeout}},
            tag=f"{lease.name}-{identity}-{time.monotonic_ns()}")

    def warm(self, seconds: float) -> None:
        # /readyz answers once its informers synced: "leader" or "follower".
        self._proc.wait_ready(seconds)

    def leading(self) -> bool:
        return self._proc.ready() == "leader"

    def kill(self) -> None:
        self._proc.stop(signal.SIGKILL)

    def stop(self) -> None:
        with contextlib.suppress(AssertionError):
            self._proc.stop()

    @property
    def log(self) -> Path:
        return self._proc.log
