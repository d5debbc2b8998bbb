"""Import cycles in a grimp graph: a small finder any test can call.

A cycle is a set of modules each of which reaches every other through imports (a strongly
connected component of more than one module, or a module importing itself). grimp reads
every import statement, so one made only under ``TYPE_CHECKING`` counts: hiding an import
from the interpreter does not untangle the modules for a reader or a type checker.
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp


def build(*packages: str) -> grimp.ImportGraph:
    return grimp.build_graph(*packages, include_external_packages=False)


def cycles(graph: grimp.ImportGraph, within: Iterable[str] | None = None) -> list[list[str]]:
    """Each cycle among ``within`` (default: every module of the graph) as its modules,
    sorted; the cycles sorted by their first module."""
    nodes = sorted(set(graph.modules if within is None else within))
    allowed = set(nodes)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    # Tarjan's algorithm, iteratively: a package's import chains can run deeper than
    # Python's recursion limit allows.
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(_edges(graph, root, allowed))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(_edges(graph, step, allowed)))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in _edges(graph, node, allowed):
                    found.append(sorted(component))
    return sorted(found)


def _edges(graph: grimp.ImportGraph, module: str, allowed: set[str]) -> set[str]:
    return {m for m in graph.find_modules_directly_imported_by(module) if m in allowed}


def describe(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    """The imports inside one cycle, one per line with its source line, for a failure
    message that says which statement to move."""
    members = set(cycle)
    lines = []
    for importer in cycle:
        for imported in sorted(_edges(graph, importer, members)):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{detail['line_number']}: "
                             f"{detail['line_contents']}")
    return "\n".join(lines)
