"""The product builds and installs the same from every source a user has: a checkout whose
git writes no symbolic links (``core.symlinks=false``, as on Windows or some CI caches),
the sdist, and an editable install. Each wheel holds every package with exactly the
checkout's modules and the simulator's bundled trace; each install imports every module
under one path, its own.

The builds are PEP 517 builds in isolated environments (``python -m build``, as a user's
``pip install`` does), so setuptools comes from PyPI the first time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.product import PACKAGES, ROOT

#: Data files a package ships beside its modules.
DATA = {"vgpu_simulate/data/README.md"}


def _checkout_files() -> list[str]:
    # What a clone has: tracked files and new ones not ignored (the tests run on a
    # working tree, which may hold a change not yet committed).
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    # A file deleted in the working tree but not yet in git's index is not in a clone.
    return [f for f in out.split("\0")
            if f and ((ROOT / f).exists() or (ROOT / f).is_symlink())]


def clone_without_symlinks(dest: Path) -> Path:
    """The working tree as git writes it with ``core.symlinks=false``: a link becomes a
    plain file holding its target's path."""
    for name in _checkout_files():
        source, target = ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.write_text(os.readlink(source))
        elif source.is_file():
            target.write_bytes(source.read_bytes())
    return dest


def build(kind: str, source: Path, out: Path) -> Path:
    result = subprocess.run([sys.executable, "-m", "build", f"--{kind}", "--outdir", str(out),
                             str(source)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (built,) = out.glob("*.whl" if kind == "wheel" else "*.tar.gz")
    return built


def product_files() -> set[str]:
    """The checkout's modules (and package data): what every wheel must hold, no more."""
    found = set(DATA)
    for name in PACKAGES:
        for path in (ROOT / name).rglob("*"):
            relative = path.relative_to(ROOT).as_posix()
            module = path.suffix in (".py", ".pyi") and "__pycache__" not in path.parts
            data = path.suffix == ".gz" or (path.suffix == ".json" and "/data/" in relative)
            if module or data:
                found.add(relative)
    return found


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist()
                if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}


def imports_everything(site: Path, cwd: Path) -> dict[str, str]:
    """Import every module of every package from ``site`` only (a fresh interpreter, run
    outside the checkout, with ``site`` as a site folder so an editable install's path
    hook works); returns each package's ``__file__``."""
    code = textwrap.dedent(f"""
        import importlib, json, pkgutil, site, sys
        sys.path[:] = [p for p in sys.path if p and not p.startswith({str(ROOT)!r})]
        sys.path.insert(0, {str(site)!r})
        site.addsitedir({str(site)!r})
        files = {{}}
        for name in {list(PACKAGES)!r}:
            package = importlib.import_module(name)
            files[name] = package.__file__
            for module in pkgutil.walk_packages(package.__path__, name + "."):
                importlib.import_module(module.name)
        from vgpu_simulate import bundled
        print(json.dumps(files))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-I", "-c", code], cwd=cwd, check=False,
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    files: dict[str, str] = json.loads(result.stdout.splitlines()[-1])
    return files


def install(wheel_or_tree: Path, target: Path, *, editable: bool = False) -> None:
    args = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
            "--disable-pip-version-check"]
    if editable:
        # An editable install writes its path hook into a site folder; --prefix gives one.
        args += ["--prefix", str(target), "-e", str(wheel_or_tree)]
    else:
        args += ["--target", str(target), str(wheel_or_tree)]
    result = subprocess.run(args, check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def site_of_prefix(prefix: Path) -> Path:
    (site,) = prefix.glob("lib/python3*/site-packages")
    return site


@pytest.fixture(scope="module")
def expected() -> set[str]:
    files = product_files()
    assert {"vgpu/cli.py", "vgpu_scheduler/host/scheduler.py", "vgpu_simulate/cli.py"} <= files
    assert any(f.startswith("vgpu_simulate/data/") and f.endswith(".csv.gz") for f in files)
    return files


def test_a_checkout_without_symlinks_builds_the_whole_product(tmp_path: Path,
                                                               expected: set[str]) -> None:
    tree = clone_without_symlinks(tmp_path / "clone")
    wheel = build("wheel", tree, tmp_path / "dist")
    assert wheel_files(wheel) == expected
    install(wheel, tmp_path / "site")
    files = imports_everything(tmp_path / "site", tmp_path)
    assert all(f.startswith(str(tmp_path / "site")) for f in files.values()), files


def test_the_sdist_is_the_product_and_builds_it(tmp_path: Path, expected: set[str]) -> None:
    sdist = build("sdist", ROOT, tmp_path / "sdist")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
        archive.extractall(tmp_path / "unpacked", filter="data")
    # No test of a checkout travels without the checkout it tests.
    assert not any(n.startswith("tests/") for n in names)
    assert not any(Path(n).is_symlink() for n in names)
    (tree,) = (tmp_path / "unpacked").iterdir()
    wheel = build("wheel", tree, tmp_path / "dist")
    assert wheel_files(wheel) == expected
    install(wheel, tmp_path / "site")
    imports_everything(tmp_path / "site", tmp_path)


def test_an_editable_install_imports_each_module_from_its_one_path(tmp_path: Path) -> None:
    tree = clone_without_symlinks(tmp_path / "clone")
    install(tree, tmp_path / "prefix", editable=True)
    files = imports_everything(site_of_prefix(tmp_path / "prefix"), tmp_path)
    # Tracebacks, coverage and breakpoints name the file in the tree: one path per module.
    assert files == {name: str(tree / name / "__init__.py") for name in PACKAGES}
