"""The Kubernetes binaries, as built by ``build.sh`` (cached outside the repository).

Separate from what runs them: ``ensure_binaries`` (etcd, kube-apiserver, kubectl) is also
what tests that only need kubectl (``kubectl kustomize``) call; ``ensure_node_binaries``
(a real node: kubelet, containerd, runc, busybox), ``ensure_kube_scheduler`` and
``ensure_kube_controller_manager`` build their target only when a test asks for it, so a
run without those tests never waits for them.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build.sh"


class ControlPlaneError(RuntimeError):
    """The binaries could not be built, or the control plane did not come up."""


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kubectl: Path
    etcd: Path


@dataclass(frozen=True)
class NodeBinaries:
    """What a real node runs, all from one bin folder (``build.sh node``)."""

    bin_dir: Path

    @property
    def kubelet(self) -> Path:
        return self.bin_dir / "kubelet"

    @property
    def containerd(self) -> Path:
        return self.bin_dir / "containerd"

    @property
    def ctr(self) -> Path:
        return self.bin_dir / "ctr"

    @property
    def runc(self) -> Path:
        return self.bin_dir / "runc"

    @property
    def busybox(self) -> Path:
        return self.bin_dir / "busybox"


NODE_EXECUTABLES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc",
                    "busybox")


def ensure_binaries(build_script: Path = BUILD_SCRIPT) -> Binaries:
    """etcd, kube-apiserver and kubectl (``build.sh controlplane``)."""
    bin_dir = run_build(("controlplane",), ("kube-apiserver", "kubectl", "etcd"), build_script)
    return Binaries(bin_dir / "kube-apiserver", bin_dir / "kubectl", bin_dir / "etcd")


def ensure_node_binaries(build_script: Path = BUILD_SCRIPT) -> NodeBinaries:
    """The kubelet and its container runtime (``build.sh node``)."""
    return NodeBinaries(run_build(("node",), NODE_EXECUTABLES, build_script))


def ensure_kube_scheduler(build_script: Path = BUILD_SCRIPT) -> Path:
    """kube-scheduler (``build.sh kube-scheduler``)."""
    return run_build(("kube-scheduler",), ("kube-scheduler",), build_script) / "kube-scheduler"


def ensure_kube_controller_manager(build_script: Path = BUILD_SCRIPT) -> Path:
    """kube-controller-manager (``build.sh kube-controller-manager``)."""
    return run_build(("kube-controller-manager",), ("kube-controller-manager",),
                     build_script) / "kube-controller-manager"


def run_build(targets: tuple[str, ...], executables: tuple[str, ...],
              build_script: Path = BUILD_SCRIPT) -> Path:
    """Run build.sh for ``targets`` (instant once cached) and return its bin folder.

    Its progress is passed on to our stderr as it comes (a cold build takes
    minutes, and silence would look like a hang) and its last lines go into
    the error, so that a failed build is explained wherever it is reported.
    """
    proc = subprocess.Popen(
        ["bash", str(build_script), *targets],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    tail: collections.deque[str] = collections.deque(maxlen=30)
    for line in proc.stderr:
        sys.stderr.write(line)
        tail.append(line)
    lines = proc.stdout.read().strip().splitlines()
    returncode = proc.wait()
    if returncode != 0 or not lines:
        raise ControlPlaneError(
            f"{build_script} failed with exit code {returncode}:\n{''.join(tail)}"
        )
    bin_dir = Path(lines[-1])
    for name in executables:
        if not os.access(bin_dir / name, os.X_OK):
            raise ControlPlaneError(f"{build_script} reported {bin_dir} but {bin_dir / name} "
                                    "is missing")
    return bin_dir
