"""The manifests' sources as objects, read without kustomize.

What ``test_manifests``, ``test_manifests_rbac`` and ``test_manifests_pods`` read: the
objects a kustomization lists (its bases' included, no patches applied), ``BASE`` and
``CORE`` loaded once, and the pod specs of every workload.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
Obj = dict[str, Any]


def kustomization(folder: Path) -> Obj:
    data: Obj = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return data


def docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def resources(folder: Path) -> list[Obj]:
    """The objects a kustomization lists, its bases' included (no patches applied)."""
    k = kustomization(folder)
    out: list[Obj] = []
    for base in k.get("bases", []):
        out += resources((folder / base).resolve())
    for name in k.get("resources", []):
        out += docs(folder / name)
    return out


def kustomizations() -> list[Path]:
    return sorted(p.parent for p in MANIFESTS.rglob("kustomization.yaml"))


BASE = resources(MANIFESTS / "base")
CORE = resources(MANIFESTS / "base" / "core")


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, (kind, name, len(hits))
    return hits[0]


def pod_specs(objs: list[Obj]) -> Iterator[tuple[str, Obj]]:
    for o in objs:
        spec = o.get("spec", {})
        if o["kind"] in ("Deployment", "DaemonSet", "Job"):
            yield f"{o['kind']}/{o['metadata']['name']}", spec["template"]["spec"]
        elif o["kind"] == "CronJob":
            job = spec["jobTemplate"]["spec"]
            yield f"CronJob/{o['metadata']['name']}", job["template"]["spec"]
