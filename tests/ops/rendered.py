"""The manifests as a current kubectl's kustomize renders them, once per folder.

What the checks that must see every overlay as applied (patches, namespaces, images)
read: ``test_manifests_rbac`` among them. Needs a kubectl of 1.32 or later
(:mod:`tests.ops.modern_kubectl`), which ``.ci/run`` makes sure of.
"""

from __future__ import annotations

import copy
import functools
import subprocess

import yaml

from tests.ops import modern_kubectl
from tests.ops.manifest_sources import MANIFESTS, Obj

#: Every folder a user applies: the base and each overlay.
INSTALLS = ["base", *sorted(f"overlays/{p.name}" for p in (MANIFESTS / "overlays").iterdir()
                            if (p / "kustomization.yaml").is_file())]


def render(folder: str) -> list[Obj]:
    """The objects ``kubectl kustomize manifests/<folder>`` prints (a copy to change)."""
    return copy.deepcopy(_render(folder))


@functools.cache
def _render(folder: str) -> list[Obj]:
    hit = modern_kubectl.find()
    assert hit is not None, modern_kubectl.WHY_MISSING
    proc = subprocess.run([hit[0], "kustomize", str(MANIFESTS / folder)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"kubectl kustomize {folder}:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]
