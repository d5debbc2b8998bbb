"""The image's build inputs, as one digest: ``python3 tests/image/context.py [ROOT]``.

``build.sh`` names the image archive it exports for a real node by it
(``$VGPUDEV_IMAGE_CACHE/archives/<digest>.tar``); the install suite
(``tests/e2e/install_support.py``) computes it again and builds when its checkout's archive
is missing, so the suite never runs an image older than the checkout. The inputs: the
Dockerfile, what ``.dockerignore`` admits into its build context (less bytecode), and
everything under tests/image, which builds the bases and checks the image. Standard
library only: build.sh runs it with the system's python3.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path


def admitted(root: Path) -> list[str]:
    """The patterns ``.dockerignore`` lets into the build context (its ``!`` lines: it
    ignores everything else), so a package added there is an input here too."""
    lines = (root / ".dockerignore").read_text().splitlines()
    return [line[1:].rstrip("/") for line in lines if line.startswith("!")]


def inputs(root: Path) -> list[Path]:
    found: list[Path] = []
    for pattern in ("Dockerfile", ".dockerignore", *admitted(root), "tests/image"):
        # A pattern such as vgpu_* names every folder it matches, as the builder reads it.
        for path in root.glob(pattern):
            candidates = [path] if path.is_file() else list(path.rglob("*"))
            found += [p for p in candidates
                      if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return sorted(set(found))


def digest(root: Path) -> str:
    total = hashlib.sha256()
    for path in inputs(root):
        total.update(path.relative_to(root).as_posix().encode() + b"\0")
        total.update(hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()[:16]


if __name__ == "__main__":
    print(digest(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
