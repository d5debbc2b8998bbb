"""No import cycle anywhere in the product: no module imports, directly or through others,
a module that imports it, imports under ``TYPE_CHECKING`` included. A cycle hidden behind
``TYPE_CHECKING`` still ties its modules together: none of them can be read, tested or
moved without the others.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import grimp
import pytest

from tests import cycles
from tests.product import PACKAGES


def test_no_import_cycle() -> None:
    # Every package of the product, in one graph: a cycle across two of them counts too.
    graph = cycles.build(*PACKAGES)
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


def test_the_finder_sees_cycles_behind_type_checking(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A cycle only a type annotation needs, beside a plain chain that is no cycle.
    package = tmp_path / "circled"
    package.mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from circled import b\n",
        "b.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from circled import c
            """,
        "c.py": "from circled import a\n",
        "d.py": "from circled import a\n",
    }
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles.cycles(cycles.build("circled")) == [["circled.a", "circled.b", "circled.c"]]
    without = grimp.build_graph("circled", exclude_type_checking_imports=True, cache_dir=None)
    assert cycles.cycles(without) == []
