"""The HAMi-core builds the agent's image carries, and the check every build passes.

The image's ``hami-core`` stages (the Dockerfile; docs/isolation-setup.md#the-library-in-the-image)
build HAMi-core's ``libvgpu.so`` at one pinned commit, by its own ``build.sh`` (Debug: any
other build type hides its wrappers), once per supported CUDA major, into
``<bundle>/cuda<major>/libvgpu.so``, and then run this module, which checks each build as the
agent will (:func:`check`) and writes ``<bundle>/index.json``::

    {"version": 1, "ref": "<40-hex commit>", "repository": "https://github.com/...",
     "builds": [{"cuda": 12, "file": "cuda12/libvgpu.so", "sha256": "<hex>"}, ...]}

so that a build without its wrappers fails the image build, not a node. The agent reads the
index at start (:mod:`vgpu_nodeagent.isolation.hami_library`).

    python -m vgpu_nodeagent.isolation.hami_bundle BUNDLE_DIR --ref COMMIT [--repository URL]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu.errors import LibraryError
from vgpu_nodeagent.isolation import elf_symbols

INDEX = "index.json"
VERSION = 1
#: What HAMi-core must export to hold a container to its grant: memory allocation and the
#: memory CUDA reports (cuMemGetInfo_v2, cuDeviceTotalMem_v2, NVML's), kernel launches for
#: its compute limiter, and cuGetProcAddress (both versions), through which CUDA 12 and
#: later runtimes find every driver function: without them no other wrapper takes.
REQUIRED_WRAPPERS = ("cuInit", "cuMemAlloc_v2", "cuMemGetInfo_v2", "cuDeviceTotalMem_v2",
                     "cuLaunchKernel", "cuGetProcAddress", "cuGetProcAddress_v2",
                     "nvmlDeviceGetMemoryInfo")
#: A libvgpu.so is a few MiB; far larger is not one.
MAX_BYTES = 256 << 20
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Build:
    cuda: int
    #: Relative to the bundle folder.
    file: str
    sha256: str


@dataclass(frozen=True)
class Bundle:
    folder: str
    ref: str
    repository: str
    builds: tuple[Build, ...]

    def path(self, build: Build) -> str:
        return os.path.join(self.folder, build.file)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check(data: bytes, machine: int | None) -> elf_symbols.SharedObject:
    """What the agent requires of a library before any container gets it: a shared object
    for this machine (``machine``: the ELF ``e_machine``, None: any) that exports every
    wrapper of :data:`REQUIRED_WRAPPERS`. Raises :class:`LibraryError` saying why not."""
    shared = elf_symbols.read(data)
    if machine is not None and shared.machine != machine:
        raise LibraryError(f"built for ELF machine {shared.machine}, not this node's "
                           f"({machine})")
    missing = [name for name in REQUIRED_WRAPPERS if name not in shared.exported]
    if missing:
        raise LibraryError(
            f"does not export {', '.join(missing)} ({len(shared.exported)} functions "
            f"exported): a HAMi-core build other than Debug hides its wrappers "
            f"(-fvisibility=hidden) and enforces nothing; build it with its build.sh")
    return shared


def read_file(path: str) -> bytes:
    """The file's bytes, at most :data:`MAX_BYTES`; raises :class:`LibraryError`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise LibraryError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise LibraryError(f"{path} is over {MAX_BYTES >> 20} MiB: not a libvgpu.so")
    return data


def _build(item: Any, where: str) -> Build:
    if not isinstance(item, Mapping):
        raise LibraryError(f"{where}: expected an object")
    cuda, file, digest = item.get("cuda"), item.get("file"), item.get("sha256")
    if isinstance(cuda, bool) or not isinstance(cuda, int) or not 1 <= cuda <= 99:
        raise LibraryError(f"{where}.cuda: expected a CUDA major from 1 to 99")
    if (not isinstance(file, str) or not file or os.path.isabs(file)
            or ".." in file.split("/")):
        raise LibraryError(f"{where}.file: expected a path inside the bundle")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise LibraryError(f"{where}.sha256: expected 64 lowercase hex digits")
    return Build(cuda, file, digest)


def read(folder: str) -> Bundle | None:
    """The bundle in ``folder``; None when the folder does not exist (an image built
    without HAMi-core). Raises :class:`LibraryError` for an index that cannot be used."""
    if not os.path.isdir(folder):
        return None
    path = os.path.join(folder, INDEX)
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except OSError as exc:
        raise LibraryError(f"cannot read the bundle index {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise LibraryError(f"the bundle index {path} is not JSON: {exc}") from None
    if not isinstance(raw, Mapping) or raw.get("version") != VERSION:
        raise LibraryError(f"{path}: not a version {VERSION} bundle index")
    ref = raw.get("ref")
    if not isinstance(ref, str) or not _COMMIT.fullmatch(ref):
        raise LibraryError(f"{path}: ref must be HAMi-core's full commit (40 hex digits)")
    items = raw.get("builds")
    if not isinstance(items, list) or not items:
        raise LibraryError(f"{path}: no builds")
    builds = tuple(_build(item, f"{path}: builds[{i}]") for i, item in enumerate(items))
    if len({b.cuda for b in builds}) != len(builds):
        raise LibraryError(f"{path}: two builds for one CUDA major")
    repository = raw.get("repository")
    return Bundle(folder, ref, repository if isinstance(repository, str) else "", builds)


def choose(bundle: Bundle, driver_version: int | None) -> Build:
    """The build for a driver of CUDA ``driver_version`` (NVML's 12040): the newest CUDA
    major it supports (a driver runs what older toolkits built). Raises
    :class:`LibraryError` when none fits or the driver's version is unknown."""
    majors = ", ".join(str(b.cuda) for b in sorted(bundle.builds, key=lambda b: b.cuda))
    if driver_version is None:
        raise LibraryError(f"the driver's CUDA version is unknown (NVML did not say), so no "
                           f"build of the bundle (CUDA {majors}) can be chosen")
    major = driver_version // 1000
    fitting = [b for b in bundle.builds if b.cuda <= major]
    if not fitting:
        raise LibraryError(f"the driver supports CUDA {major}, the bundle has builds for CUDA "
                           f"{majors} only: upgrade the driver")
    return max(fitting, key=lambda b: b.cuda)


def write(folder: str, ref: str, repository: str) -> dict[str, Any]:
    """Check every ``cuda<major>/libvgpu.so`` under ``folder`` and write its index (the
    image build's step). Raises :class:`LibraryError` naming the build that fails."""
    if not _COMMIT.fullmatch(ref):
        raise LibraryError(f"--ref {ref!r}: HAMi-core's full commit (40 hex digits)")
    builds = []
    for name in sorted(os.listdir(folder)):
        match = re.fullmatch(r"cuda(\d{1,2})", name)
        path = os.path.join(folder, name, "libvgpu.so")
        if match is None or not os.path.isfile(path):
            continue
        data = read_file(path)
        try:
            check(data, None)
        except LibraryError as exc:
            raise LibraryError(f"{path}: {exc}") from None
        builds.append({"cuda": int(match.group(1)), "file": f"{name}/libvgpu.so",
                       "sha256": sha256(data)})
    if not builds:
        raise LibraryError(f"{folder}: no cuda<major>/libvgpu.so to index")
    index = {"version": VERSION, "ref": ref, "repository": repository, "builds": builds}
    with open(os.path.join(folder, INDEX), "w", encoding="utf-8") as handle:
        json.dump(index, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return index


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vgpu_nodeagent.isolation.hami_bundle",
                                     description="check HAMi-core builds, write their index")
    parser.add_argument("folder")
    parser.add_argument("--ref", required=True, help="HAMi-core's commit the builds are of")
    parser.add_argument("--repository", default="https://github.com/Project-HAMi/HAMi-core")
    args = parser.parse_args(argv)
    try:
        index = write(args.folder, args.ref, args.repository)
    except LibraryError as exc:
        print(f"hami_bundle: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(index, sort_keys=True))
    return 0


if __name__ == "__main__":  # pragma: no cover - the image build runs it
    sys.exit(main())
