"""Container images without a registry: OCI archives assembled from Debian's busybox.

A real node needs two images, and nothing may be pulled: the pod sandbox ("pause") image
and a small workload image. Both are one layer holding ``/bin/busybox`` (the static binary
``build.sh`` unpacks from ``busybox-static``) and its applets as symlinks; they differ in
their config. :func:`write_archive` writes them as an OCI image-layout tar that
``ctr -n k8s.io images import`` reads; the archive is byte-for-byte reproducible (fixed
times and owners), so its digests are the same on every machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Tests' pods name these with ``imagePullPolicy: Never``; containerd's sandbox image is
#: PAUSE. The registry host does not exist: a pull attempt fails instead of leaving the
#: machine.
PAUSE = "vgpu.local/pause:1"
BUSYBOX = "vgpu.local/busybox:1"

#: The applets the tests' containers use (``sh -c 'env; sleep ...'``), linked to busybox.
APPLETS = ("sh", "env", "sleep", "cat", "ls", "echo", "true", "printenv", "grep", "wc")

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Image:
    name: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()


#: The sandbox sleeps until containerd kills it (a sandbox is stopped with SIGKILL).
IMAGES = (Image(PAUSE, entrypoint=("/bin/sleep", "2147483647")),
          Image(BUSYBOX, cmd=("sh",)))


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, *,
         mode: int = 0o644, link: str | None = None, folder: bool = False) -> None:
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
    info.mode = mode
    if folder:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    elif link is not None:
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, link, 0o777
    else:
        info.size = len(data or b"")
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def layer(busybox: bytes) -> bytes:
    """The one filesystem layer: busybox, its applets, and the folders a container needs."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in ("bin", "etc", "tmp", "proc", "sys", "dev"):
            _add(tar, folder, folder=True)
        _add(tar, "bin/busybox", busybox, mode=0o755)
        for applet in APPLETS:
            _add(tar, f"bin/{applet}", link="busybox")
    return out.getvalue()


def _config(image: Image, diff_id: str) -> bytes:
    config: dict[str, Any] = {"Env": ["PATH=/bin"], "WorkingDir": "/"}
    if image.entrypoint:
        config["Entrypoint"] = list(image.entrypoint)
    if image.cmd:
        config["Cmd"] = list(image.cmd)
    return _json({"architecture": "amd64", "os": "linux", "config": config,
                  "rootfs": {"type": "layers", "diff_ids": [diff_id]}})


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_archive(busybox: Path, out: Path, images: Sequence[Image] = IMAGES) -> Path:
    """Write ``images`` as one OCI image-layout tar at ``out``."""
    blobs: dict[str, bytes] = {}
    layer_bytes = layer(busybox.read_bytes())
    layer_digest = _digest(layer_bytes)
    blobs[layer_digest] = layer_bytes
    manifests = []
    for image in images:
        config = _config(image, layer_digest)  # uncompressed: the diff ID is the digest
        blobs[_digest(config)] = config
        manifest = _json({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": _digest(config),
                       "size": len(config)},
            "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest,
                        "size": len(layer_bytes)}]})
        blobs[_digest(manifest)] = manifest
        manifests.append({
            "mediaType": OCI_MANIFEST, "digest": _digest(manifest), "size": len(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            # containerd names the imported image after this annotation.
            "annotations": {"io.containerd.image.name": image.name,
                            "org.opencontainers.image.ref.name": image.name}})
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        _add(tar, "index.json", _json({"schemaVersion": 2, "manifests": manifests}))
        _add(tar, "blobs", folder=True)
        _add(tar, "blobs/sha256", folder=True)
        for digest, data in sorted(blobs.items()):
            _add(tar, f"blobs/sha256/{digest.removeprefix('sha256:')}", data)
    return out
