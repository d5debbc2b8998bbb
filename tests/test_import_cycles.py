"""No import cycle in the core or in the components that are settled on it.

The scheduler and the node agent join this list when their restructuring lands; the lead
then makes it repository-wide.
"""

from __future__ import annotations

import grimp
import pytest

from tests import cycles

PACKAGES = ("vgpu", "vgpu_kubectl", "vgpu_webhook", "vgpu_certs")


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    graph = cycles.build(package)
    found = cycles.cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(
        f"{', '.join(c)}:\n{cycles.describe(graph, c)}" for c in found)


@pytest.mark.parametrize(("imports", "expected"), [
    ([], []),
    ([("p.a", "p.b")], []),
    ([("p.a", "p.b"), ("p.b", "p.a")], [["p.a", "p.b"]]),
    # Only the modules on the loop, not those leading into it.
    ([("p.x", "p.a"), ("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a")],
     [["p.a", "p.b", "p.c"]]),
    ([("p.a", "p.a")], [["p.a"]]),
    ([("p.a", "p.b"), ("p.b", "p.a"), ("p.c", "p.d"), ("p.d", "p.c")],
     [["p.a", "p.b"], ["p.c", "p.d"]]),
], ids=["none", "chain", "two", "three-behind-a-tail", "self", "two-cycles"])
def test_the_finder(imports: list[tuple[str, str]], expected: list[list[str]]) -> None:
    graph = grimp.ImportGraph()
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported, line_number=1,
                         line_contents=f"import {imported}")
    assert cycles.cycles(graph) == expected


def test_the_finder_names_the_import_lines() -> None:
    graph = grimp.ImportGraph()
    graph.add_import(importer="p.a", imported="p.b", line_number=3, line_contents="import p.b")
    graph.add_import(importer="p.b", imported="p.a", line_number=7, line_contents="import p.a")
    assert cycles.describe(graph, ["p.a", "p.b"]) == (
        "  p.a:3: import p.b\n  p.b:7: import p.a")
