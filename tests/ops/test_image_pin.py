"""The image every install runs: one reference, fully qualified, pinned by digest, which a
release sets in every kustomization at once (tests/image/pin.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.image import pin
from tests.ops import modern_kubectl
from tests.ops.manifest_sources import MANIFESTS, pod_specs
from tests.ops.rendered import INSTALLS, render


@pytest.mark.parametrize("folder", INSTALLS)
def test_every_install_runs_one_image_pinned_by_digest(folder: str) -> None:
    images = {c["image"] for _, spec in pod_specs(render(folder))
              for c in spec.get("initContainers", []) + spec["containers"]}
    assert images == {pin.UNRELEASED}, images
    assert pin.PINNED.fullmatch(pin.UNRELEASED)


@pytest.mark.parametrize("reference", [
    "vgpu", "vgpu:0.1.0", "ghcr.io/org/vgpu:0.1.0", "org/vgpu@sha256:" + "a" * 64,
    "ghcr.io/org/vgpu@sha256:" + "a" * 63, "ghcr.io/org/vgpu@sha512:" + "a" * 64,
])
def test_a_reference_that_is_not_qualified_and_pinned_is_refused(reference: str) -> None:
    with pytest.raises(ValueError, match="is not REGISTRY/PATH@sha256"):
        pin.entry(reference)


def test_a_release_pins_every_kustomization_at_once(tmp_path: Path) -> None:
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    release = "registry.example.com:5000/gpu/vgpu@sha256:" + "ab" * 32
    changed = pin.pin(release, copy)
    assert {p.relative_to(copy) for p in changed} == \
        {p.relative_to(MANIFESTS) for p in pin.kustomizations()}
    hit = modern_kubectl.find()
    assert hit is not None, modern_kubectl.WHY_MISSING
    for folder in ("base", "overlays/k8s-1.20-fake-gpus"):
        out = subprocess.run([hit[0], "kustomize", str(copy / folder)], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        objs = [d for d in yaml.safe_load_all(out) if d]
        images = {c["image"] for _, spec in pod_specs(objs)
                  for c in spec.get("initContainers", []) + spec["containers"]}
        assert images == {release}, (folder, images)
    # Again: nothing left to change.
    assert pin.pin(release, copy) == []
