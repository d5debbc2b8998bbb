"""The product's packages, found by the one rule pyproject.toml states: every top-level
folder named ``vgpu`` or ``vgpu_*`` is a package, imported and installed under its
folder's name. The tests that walk the product (layout, import cycles) read them here."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def is_product(name: str) -> bool:
    return name == "vgpu" or name.startswith("vgpu_")


#: The import names, which are the folder names.
PACKAGES = tuple(sorted(p.parent.name for p in ROOT.glob("*/__init__.py")
                        if is_product(p.parent.name)))
