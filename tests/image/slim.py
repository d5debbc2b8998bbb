"""Trim the image's virtual environment (run by the Dockerfile's build stage, under -OO).

What goes, each a large share of the image and never used by vgpu:
- ``kubernetes/aio``: the asyncio twin of the Kubernetes client (about 68 MB); vgpu's
  adapter (``vgpu.kube``) uses the synchronous client, which imports nothing from it;
- test suites inside packages (``*/tests``);
- the source of the Kubernetes client's generated API and model modules (about 57 MB of
  Python, mostly docstrings): replaced by bytecode compiled under -OO (no docstrings,
  about 18 MB). Tracebacks through those modules show no source lines; vgpu's own code
  and every other package keep their source.
"""

from __future__ import annotations

import compileall
import pathlib
import shutil
import sys


def site_packages(venv: pathlib.Path) -> pathlib.Path:
    (found,) = venv.glob("lib/python3*/site-packages")
    return found


def main(venv: pathlib.Path) -> None:
    if sys.flags.optimize < 2:
        raise SystemExit("run under python -OO: the compiled modules drop their docstrings")
    site = site_packages(venv)
    shutil.rmtree(site / "kubernetes" / "aio", ignore_errors=True)
    for tests in sorted(site.glob("*/**/tests"), reverse=True):
        if tests.is_dir():
            shutil.rmtree(tests)
    for generated in (site / "kubernetes/client/api", site / "kubernetes/client/models"):
        for cache in generated.rglob("__pycache__"):
            shutil.rmtree(cache)
        # legacy=True writes x.pyc beside x.py, where an import finds it without the source.
        if not compileall.compile_dir(generated, quiet=1, legacy=True):
            raise SystemExit(f"compiling {generated} failed")
        for source in generated.rglob("*.py"):
            source.unlink()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
