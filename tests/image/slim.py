"""What of the Python side goes into the image (run by the Dockerfile's build stage).

``slim.py requirements PYPROJECT``: the requirements to install besides vgpu itself, one a
line: the project's dependencies less ``kubernetes``, the official client, which
vgpu imports only to read a kubeconfig (an operator's laptop). In a pod every component
reaches the API server through the service account's urllib3 transport
(``vgpu/kube/transport.py``), which never imports it, so the image leaves it out with
what only it pulls in (pydantic, requests, oauthlib, websocket-client, python-dateutil,
tzdata: about 40 MB); ``connect()`` with a kubeconfig in the image is a one-line error.

``slim.py trim VENV``: after the install, drop what nothing imports at run time:

- test suites inside packages (``*/tests``, ``conftest.py``);
- type stubs (``*.pyi``), C and Cython sources and headers (``*.c``, ``*.h``, ``*.pyx``,
  ``*.pxd``), static libraries (``*.a``): for type checkers and compilers;
- numpy's build-time parts: ``numpy.f2py`` and ``numpy.distutils`` (imported only when
  named, never by vgpu), its C headers and ``npymath`` library (``_core/include``,
  ``_core/lib``), and ``_core/_simd`` (1.5 MB, its SIMD test module).

``slim.py strip VENV``: ``strip --strip-unneeded`` every shared library (about 14 MB of
symbol tables; needs binutils, in the build stage only), except those with an RPATH or
RUNPATH: auditwheel rewrote those with patchelf (numpy's OpenBLAS and the modules that
load it), and strip leaves such a file with segments the loader refuses ("ELF load
command address/offset not page-aligned").
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

#: Dependencies the image leaves out (see the module docstring).
LEFT_OUT = {"kubernetes"}
#: Files no import reads, by name, anywhere in site-packages.
UNUSED_FILES = ("*.pyi", "*.c", "*.h", "*.pyx", "*.pxd", "*.a", "conftest.py")
#: Parts of numpy only its build tooling and test suite use.
NUMPY_UNUSED = ("f2py", "distutils", "_core/include", "_core/lib", "_core/_simd.*.so")


def requirements(pyproject: pathlib.Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    kept = []
    for requirement in project["dependencies"]:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        if name.lower() not in LEFT_OUT:
            kept.append(requirement)
    return kept


def site_packages(venv: pathlib.Path) -> pathlib.Path:
    (found,) = venv.glob("lib/python3*/site-packages")
    return found


def remove(path: pathlib.Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def trim(venv: pathlib.Path) -> None:
    site = site_packages(venv)
    for tests in sorted(site.glob("*/**/tests"), reverse=True):
        if tests.is_dir():
            shutil.rmtree(tests)
    for pattern in UNUSED_FILES:
        for path in site.rglob(pattern):
            remove(path)
    for pattern in NUMPY_UNUSED:
        for path in (site / "numpy").glob(pattern):
            remove(path)


def strip(venv: pathlib.Path) -> None:
    stripped = kept = 0
    for path in sorted(venv.rglob("*.so*")):
        shared_library = path.suffix == ".so" or ".so." in path.name
        if not shared_library or path.is_symlink() or not path.is_file():
            continue
        dynamic = subprocess.run(["readelf", "--dynamic", str(path)], check=True,
                                 capture_output=True, text=True).stdout
        if "(RPATH)" in dynamic or "(RUNPATH)" in dynamic:
            kept += 1
            continue
        subprocess.run(["strip", "--strip-unneeded", str(path)], check=True)
        stripped += 1
    print(f"stripped {stripped} shared libraries, left {kept} patched by auditwheel")


def main(argv: list[str]) -> None:
    match argv:
        case ["requirements", pyproject]:
            print(*requirements(pathlib.Path(pyproject)), sep="\n")
        case ["trim", venv]:
            trim(pathlib.Path(venv))
        case ["strip", venv]:
            strip(pathlib.Path(venv))
        case _:
            raise SystemExit("usage: slim.py requirements PYPROJECT | trim VENV | strip VENV")


if __name__ == "__main__":
    main(sys.argv[1:])
