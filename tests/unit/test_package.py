"""The core package's own namespace: ``from vgpu import annotations`` is the module."""

from __future__ import annotations

import subprocess
import sys


def test_from_vgpu_import_annotations_is_the_module() -> None:
    # In a fresh interpreter: in this one something has long imported vgpu.annotations,
    # which binds the module over whatever the package's namespace held.
    code = "from vgpu import annotations as a; print(a.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "vgpu.annotations"
