"""The layout rules a newcomer can rely on, kept by CI.

- No module over 300 lines, generated protobuf code aside: a module that grows past that
  is doing more than one job.
- No function above cyclomatic complexity 20, measured as radon measures it, in the
  product's packages (the scheduler's host, the framework runner and everything that
  drives it, was the first place this mattered; the rule now holds everywhere).

The import contracts (the core imports no component, components never import each other,
Kubernetes I/O only in the cluster adapter, the host never imports the simulator) are in
``pyproject.toml`` and checked by ``lint-imports`` in ``.ci/run``.
"""

from __future__ import annotations

import re
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[1]
GENERATED = re.compile(r"_pb2(_grpc)?\.pyi?$")
MAX_LINES = 300
MAX_COMPLEXITY = 20
#: The product's packages (the benches and tests are scripts around them).
PRODUCT = ("vgpu/", "webhook/", "scheduler/", "nodeagent/", "certs/")


def python_files() -> list[Path]:
    skip = {".git", ".venv", "build", "dist", "__pycache__", ".mypy_cache", ".ruff_cache"}
    return sorted(p for p in ROOT.rglob("*.py")
                  if not skip.intersection(p.relative_to(ROOT).parts)
                  and not GENERATED.search(p.name))


def test_no_module_is_over_300_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in python_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


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


def test_the_rules_see_the_code() -> None:
    # A broken file walk would pass both tests above without checking anything.
    files = {p.relative_to(ROOT).as_posix() for p in python_files()}
    assert {"scheduler/host/scheduler.py", "scheduler/framework/runtime.py",
            "vgpu/codecs.py"} <= files
    assert not any(GENERATED.search(f) for f in files)
