"""Stand-ins for HAMi-core's ``libvgpu.so``, compiled with gcc from ``hami_standin.c``, and
a bundle of them as the agent's image carries one (``index.json`` written by
:mod:`vgpu_nodeagent.isolation.hami_bundle`, as the image build does)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from vgpu_nodeagent.isolation import hami_bundle

SOURCE = Path(__file__).with_name("hami_standin.c")
REF = "8f3a89c67b037d8fdfe6c4cd4d8c4f0cd6504811"
_CACHE: dict[tuple[str, ...], bytes] = {}


def compiled(*flags: str, tag: str = "0") -> bytes:
    """The stand-in built with ``flags`` (``-fvisibility=hidden``, ``-DOMIT_cuLaunchKernel``);
    ``tag`` makes builds whose bytes differ."""
    key = (*flags, tag)
    if key not in _CACHE:
        gcc = shutil.which("gcc") or shutil.which("cc")
        assert gcc is not None, "the stand-in library needs gcc (apt-get install gcc)"
        out = Path(tempfile.mkdtemp(prefix="vgpu-standin-")) / "libvgpu.so"
        subprocess.run([gcc, "-shared", "-fPIC", "-O0", f'-DSTANDIN_TAG="{tag}"', *flags,
                        "-o", str(out), str(SOURCE)], check=True, capture_output=True)
        _CACHE[key] = out.read_bytes()
        shutil.rmtree(out.parent)
    return _CACHE[key]


def library(path: Path, *flags: str, tag: str = "0") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(compiled(*flags, tag=tag))
    return path


def bundle(folder: Path, majors: Sequence[int] = (12, 13), *flags: str) -> Path:
    """A bundle of one stand-in per CUDA major (each with its own bytes), indexed."""
    for major in majors:
        library(folder / f"cuda{major}" / "libvgpu.so", *flags, tag=f"cuda{major}")
    hami_bundle.write(str(folder), REF, "https://github.com/Project-HAMi/HAMi-core")
    return folder


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
