"""No import circles: no module imports, directly or through others, a module that imports
it, imports under ``TYPE_CHECKING`` included. A circle hidden behind ``TYPE_CHECKING`` still
ties its modules together: none of them can be read, tested or moved without the others.

The graph is grimp's (import-linter's graph library, which reads the source without
importing it); :func:`import_cycles` finds the circles in any package's graph.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import grimp
import pytest

#: The packages kept free of import circles.
PACKAGES = ("vgpu_scheduler",)


def graph_of(package: str) -> grimp.ImportGraph:
    # No cache: grimp would otherwise write one into the working directory.
    return grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)


def _tangles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    without recursion): each is a set of modules that all reach one another."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[module] = min(low[module], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    tangle = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        tangle.add(member)
                        if member == module:
                            break
                    if len(tangle) > 1:
                        found.append(tangle)
    return found


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One circle per tangle of modules that import one another, as the chain
    ``a -> b -> ... -> a`` from the tangle's first module; empty when there is none."""
    cycles = []
    for tangle in sorted(_tangles(graph), key=min):
        start = min(tangle)
        nxt = min(graph.find_modules_directly_imported_by(start) & tangle)
        chain = graph.find_shortest_chain(importer=nxt, imported=start)
        assert chain is not None  # nxt reaches start: they are in one tangle
        cycles.append([start, *chain])
    return cycles


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package: str) -> None:
    cycles = import_cycles(graph_of(package))
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_finder_sees_circles_behind_type_checking(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # A circle only a type annotation needs, beside a plain chain that is no circle.
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
    assert import_cycles(graph_of("circled")) == [
        ["circled.a", "circled.b", "circled.c", "circled.a"]]
    without = grimp.build_graph("circled", exclude_type_checking_imports=True, cache_dir=None)
    assert import_cycles(without) == []
