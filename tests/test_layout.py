"""The layout rules a newcomer can rely on, kept by CI.

- No module over 300 lines, generated protobuf code aside: a module that grows past that
  is doing more than one job. The exception is a module that is one class: a class that
  reads as one may run to 600 lines rather than be cut into mixins.
- No function above cyclomatic complexity 20, measured as radon measures it, in the
  product's packages (the scheduler's host, the framework runner and everything that
  drives it, was the first place this mattered; the rule now holds everywhere).

The import contracts (the core imports no component, components never import each other,
Kubernetes I/O only in the cluster adapter, the host never imports the simulator) are in
``pyproject.toml`` and checked by ``lint-imports`` in ``.ci/run``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from radon.complexity import cc_visit

from tests.product import PACKAGES, ROOT

GENERATED = re.compile(r"_pb2(_grpc)?\.pyi?$")
MAX_LINES = 300
#: A module that holds one class (and at most a few lines around it) may run to this.
MAX_CLASS_LINES = 600
#: The share of such a module's lines its class must span.
CLASS_SHARE = 0.8
MAX_COMPLEXITY = 20
#: The product's packages (the benches and tests are scripts around them).
PRODUCT = tuple(f"{name}/" for name in PACKAGES)


def python_files() -> list[Path]:
    skip = {".git", ".venv", "build", "dist", "__pycache__", ".mypy_cache", ".ruff_cache"}
    return sorted(p for p in ROOT.rglob("*.py")
                  if not skip.intersection(p.relative_to(ROOT).parts)
                  and not GENERATED.search(p.name))


def one_class(text: str, lines: int) -> bool:
    """Whether the module is one class: a single top-level class spanning most of it."""
    classes = [n for n in ast.parse(text).body if isinstance(n, ast.ClassDef)]
    if len(classes) != 1:
        return False
    cls = classes[0]
    span = (cls.end_lineno or cls.lineno) - cls.lineno + 1
    return span >= CLASS_SHARE * lines


def over_the_limit(text: str) -> bool:
    lines = len(text.splitlines())
    if lines <= MAX_LINES:
        return False
    return lines > MAX_CLASS_LINES or not one_class(text, lines)


def test_no_module_is_over_300_lines() -> None:
    long = {str(p.relative_to(ROOT)): len(text.splitlines()) for p in python_files()
            if over_the_limit(text := p.read_text(encoding="utf-8"))}
    assert not long, (f"modules over {MAX_LINES} lines (or {MAX_CLASS_LINES} for a module "
                      f"that is one class): {long}")


@pytest.mark.parametrize(("text", "over"), [
    ("x = 1\n" * 300, False),
    ("x = 1\n" * 301, True),
    ("class A:\n" + "    x = 1\n" * 400, False),
    ("class A:\n" + "    x = 1\n" * 600, True),
    # Two classes are two jobs, whatever their size.
    ("class A:\n" + "    x = 1\n" * 200 + "class B:\n" + "    x = 1\n" * 200, True),
    # One class beside as much again of other code is not "one class".
    ("class A:\n" + "    x = 1\n" * 200 + "y = 1\n" * 200, True),
])
def test_the_line_rule(text: str, over: bool) -> None:
    assert over_the_limit(text) is over


def test_no_product_function_is_over_complexity_20() -> None:
    complex_ = {}
    for path in python_files():
        relative = path.relative_to(ROOT).as_posix()
        if not relative.startswith(PRODUCT):
            continue
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > MAX_COMPLEXITY:
                complex_[f"{relative}:{block.fullname}"] = block.complexity
    assert not complex_, f"functions above complexity {MAX_COMPLEXITY}: {complex_}"


def test_each_package_is_its_folder() -> None:
    # One tree, no links: a checkout without symlink support, the sdist and the wheel all
    # see the same files under the same names, and every path a traceback or a tool
    # names is the one in the repository.
    assert {"vgpu", "vgpu_webhook", "vgpu_scheduler", "vgpu_nodeagent", "vgpu_certs",
            "vgpu_kubectl", "vgpu_simulate"} <= set(PACKAGES)
    links = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
             if p.is_symlink() and ".git" not in p.relative_to(ROOT).parts]
    assert not links, f"symbolic links in the repository: {links}"


def test_the_rules_see_the_code() -> None:
    # A broken file walk would pass both tests above without checking anything.
    files = {p.relative_to(ROOT).as_posix() for p in python_files()}
    assert {"vgpu_scheduler/host/scheduler.py", "vgpu_scheduler/framework/runtime.py",
            "vgpu/codecs.py"} <= files
    assert not any(GENERATED.search(f) for f in files)
