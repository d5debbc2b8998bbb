"""What the container image installs (tests/image/slim.py), checked without building it;
tests/image/build.sh imports every module inside the built image."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from types import ModuleType

from tests.product import PACKAGES as PRODUCT
from tests.product import ROOT

#: Imported by the product but not installed in the image: the kubeconfig client (a
#: laptop's; connect() says it is missing) and the optional PNG plots of `vgpu simulate`.
NOT_IN_IMAGE = {"kubernetes", "matplotlib"}


def slim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slim", ROOT / "tests/image/slim.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def name_of(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def third_party_imports() -> set[str]:
    found = set()
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - set(PRODUCT) - {"__future__"}


def test_the_image_installs_every_dependency_but_the_kubernetes_client() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = slim().requirements(ROOT / "pyproject.toml")
    assert requirements == [r for r in project["dependencies"] if name_of(r) != "kubernetes"]


def test_every_package_the_product_imports_is_installed_in_the_image() -> None:
    installed = {name_of(r) for r in slim().requirements(ROOT / "pyproject.toml")}
    distributions = packages_distributions()
    imports = third_party_imports()
    assert imports >= NOT_IN_IMAGE, "the exceptions are stale"
    missing = {name for name in imports - NOT_IN_IMAGE
               if not {name_of(d) for d in distributions.get(name, [name])} & installed}
    assert not missing, f"imported but not installed in the image: {sorted(missing)}"
