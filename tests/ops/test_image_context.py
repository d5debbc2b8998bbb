"""The digest that names the image archive a real node imports (tests/image/context.py):
it moves with every input of the build and with nothing else, so the install suite never
runs an image older than its checkout, and does not rebuild for a change the image lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.image.context import admitted, digest, inputs

ROOT = Path(__file__).resolve().parents[2]
DOCKERIGNORE = "*\n!pyproject.toml\n!vgpu/\n!vgpu_*/\n!tests/image/slim.py\n**/__pycache__\n"


def tree(root: Path) -> Path:
    files = {".dockerignore": DOCKERIGNORE, "Dockerfile": "FROM base\n",
             "pyproject.toml": "[project]\n", "vgpu/core.py": "x = 1\n",
             "tests/image/slim.py": "keep = []\n", "tests/image/build.sh": "true\n",
             "vgpu_scheduler/plugin.py": "y = 2\n", "scheduler/plugin.py": "y = 2\n",
             "docs/notes.md": "notes\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_admitted_paths_are_the_dockerignore_exceptions() -> None:
    assert admitted(ROOT)[:2] == ["pyproject.toml", "README.md"]
    assert "tests/image/slim.py" in admitted(ROOT)


@pytest.mark.parametrize(("path", "text", "moves"), [
    ("vgpu/core.py", "x = 2\n", True),              # the product
    ("vgpu/new.py", "z = 3\n", True),               # a file added to it
    ("Dockerfile", "FROM other\n", True),
    ("pyproject.toml", "[project]\nname = 'v'\n", True),
    ("tests/image/build.sh", "false\n", True),      # how the image is built and checked
    (".dockerignore", DOCKERIGNORE + "!docs/\n", True),
    ("vgpu_scheduler/plugin.py", "y = 3\n", True),  # a package the pattern admits
    ("vgpu_new/mod.py", "z = 1\n", True),           # a package added later, by the pattern
    ("scheduler/plugin.py", "y = 3\n", False),      # not in this context's admitted list
    ("docs/notes.md", "other\n", False),
    ("vgpu/__pycache__/core.cpython-311.pyc", "bytecode", False),
    ("vgpu/core.pyc", "bytecode", False),
])
def test_the_digest_moves_with_the_build_inputs_only(tmp_path: Path, path: str, text: str,
                                                     moves: bool) -> None:
    root = tree(tmp_path)
    before = digest(root)
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)
    assert (digest(root) != before) is moves


def test_a_renamed_input_moves_the_digest(tmp_path: Path) -> None:
    root = tree(tmp_path)
    before = digest(root)
    (root / "vgpu/core.py").rename(root / "vgpu/main.py")
    assert digest(root) != before


def test_this_checkouts_inputs_hold_the_components_and_no_tests_but_the_images() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in inputs(ROOT)}
    assert {"Dockerfile", "pyproject.toml", "tests/image/build.sh"} <= names
    assert any(n.startswith("vgpu_webhook/") for n in names)
    assert any(n.startswith("vgpu_simulate/data/") for n in names)
    assert not any(n.startswith("tests/") and not n.startswith("tests/image/") for n in names)
