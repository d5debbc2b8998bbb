"""etcd, kube-apiserver and kubectl, as built by ``build.sh`` (cached outside the repository).

Separate from the control plane that runs them: ``ensure_binaries`` is also what tests
that only need kubectl (``kubectl kustomize``) call.
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


def ensure_binaries(build_script: Path = BUILD_SCRIPT) -> Binaries:
    """Run build.sh (instant once cached) and return the binaries it made.

    Its progress is passed on to our stderr as it comes (a cold build takes
    minutes, and silence would look like a hang) and its last lines go into
    the error, so that a failed build is explained wherever it is reported.
    """
    proc = subprocess.Popen(
        ["bash", str(build_script)],
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
    binaries = Binaries(bin_dir / "kube-apiserver", bin_dir / "kubectl", bin_dir / "etcd")
    for path in (binaries.kube_apiserver, binaries.kubectl, binaries.etcd):
        if not os.access(path, os.X_OK):
            raise ControlPlaneError(f"{build_script} reported {bin_dir} but {path} is missing")
    return binaries
