"""The image's build inputs, as one digest: ``python3 tests/image/context.py [ROOT]``.

``build.sh`` records it beside the image archive it exports for the real node
(``$VGPUDEV_IMAGE_CACHE/archives/<digest>.tar``); the install suite (``tests/e2e/install_image.py``)
computes it again and rebuilds when it differs, so the suite never runs an image older
than the checkout. The inputs: the Dockerfile, what its build context admits
(``.dockerignore``: pyproject.toml, README.md and the package folders, less bytecode) and
everything under tests/image, which builds the bases and checks the image. Standard
library only: build.sh runs it with the system's python3.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

FILES = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md")
FOLDERS = ("vgpu", "webhook", "scheduler", "nodeagent", "certs", "tests/image")


def inputs(root: Path) -> list[Path]:
    found = [root / name for name in FILES if (root / name).is_file()]
    for folder in FOLDERS:
        found += [p for p in (root / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return sorted(found)


def digest(root: Path) -> str:
    total = hashlib.sha256()
    for path in inputs(root):
        total.update(path.relative_to(root).as_posix().encode() + b"\0")
        total.update(hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()[:16]


if __name__ == "__main__":
    print(digest(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
