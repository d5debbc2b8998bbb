"""What :mod:`tests.ops.api_calls` reads: a component's modules and the values that name a
resource in them (literals, ``Literal`` types, module constants).

See that module for what a component's API calls are and how they are read.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vgpu.cluster.resources import RESOURCES

ROOT = Path(__file__).resolve().parents[2]

#: Port methods whose first argument is the resource: (verb, subresource).
BY_KIND = {"list": ("list", ""), "watch": ("watch", ""), "get": ("get", ""),
           "create": ("create", ""), "delete": ("delete", ""), "replace": ("update", ""),
           "patch_annotations": ("patch", ""), "patch_status": ("patch", "status")}
#: Port methods of one request each, with the number of positional arguments the port's
#: signature takes (a method of the same name elsewhere takes another number).
FIXED = {"bind": (4, ("", "pods", "binding", "create")),
         "evict": (2, ("", "pods", "eviction", "create")),
         "record_event": (5, ("", "events", "", "create"))}
#: The delegated authentication and authorization of the metrics servers (vgpu.kube.reviews).
REVIEWS = {"review_token": ("authentication.k8s.io", "tokenreviews", "", "create"),
           "review_access": ("authorization.k8s.io", "subjectaccessreviews", "", "create")}
#: A class defining this many port methods implements the port: it forwards, it does not call.
IMPLEMENTS = 5
PORT_METHODS = {*BY_KIND, *FIXED}
#: Port methods no other class of the product defines: a call of one is the port's,
#: whatever holds it. Any other name counts only on a receiver that holds the port.
UNIQUE = {"patch_annotations", "patch_status", "record_event"}


class Unresolved(AssertionError):
    """A port call whose resource the code does not say in a way this reader follows."""


@dataclass(frozen=True, order=True)
class ApiCall:
    group: str
    resource: str
    subresource: str
    verb: str

    @property
    def path(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass
class Module:
    name: str
    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node

    def enclosing(self, node: ast.AST, kinds: tuple[type, ...]) -> ast.AST | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, kinds):
                return node
        return None


def last_name(node: ast.expr) -> str:
    """``x`` of ``a.b._x`` and of ``x``, without leading underscores; "" otherwise."""
    if isinstance(node, ast.Attribute):
        return node.attr.lstrip("_")
    if isinstance(node, ast.Name):
        return node.id.lstrip("_")
    return ""


def names_in(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | \
        {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
         and isinstance(n.value, str)}


def _path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _product(module: str) -> bool:
    top = module.split(".", maxsplit=1)[0]
    return top == "vgpu" or top.startswith("vgpu_")


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


@functools.cache
def load(module: str) -> Module | None:
    path = _path(module)
    if path is None:
        return None
    return Module(module, ast.parse(path.read_text(), str(path)))


def _imports(mod: Module) -> Iterator[str]:
    package = mod.name if _path(mod.name) and _path(mod.name).name == "__init__.py" \
        else mod.name.rpartition(".")[0]
    for node in ast.walk(mod.tree):
        if _type_checking_only(node, mod.parents):
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)


def closure(entry: str) -> list[Module]:
    """The product modules ``entry`` runs: it and everything it imports, transitively
    (a package's ``__init__`` with each of its modules imported)."""
    seen: dict[str, Module] = {}
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen or not _product(name):
            continue
        mod = load(name)
        if mod is None:
            continue
        seen[name] = mod
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [m for m in _imports(mod) if _product(m)]
    return sorted(seen.values(), key=lambda m: m.name)


# -- what a kind expression can be -----------------------------------------------------


def kinds_of_annotation(node: ast.expr | None, mod: Module) -> set[str] | None:
    """The plurals a declared type allows: ``Literal[...]``, a module alias of one, or
    a container of such (``tuple[Kind, ...]``). ``None`` when it is ``Kind`` itself (the
    whole port: the caller follows the parameter instead) or not about kinds at all."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} if node.value in RESOURCES else None
    text = ast.unparse(node)
    if text.startswith("Literal["):
        values = {v.value for v in ast.walk(node) if isinstance(v, ast.Constant)}
        kinds = {v for v in values if v in RESOURCES}
        return kinds if kinds and len(kinds) == len(values) else None
    if isinstance(node, ast.Name):
        for stmt in mod.tree.body:  # a module-level alias: WebhookKind = Literal[...]
            if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets):
                return kinds_of_annotation(stmt.value, mod)
    return None


def is_kind_type(node: ast.expr | None) -> bool:
    return node is not None and ast.unparse(node) in ("Kind", "port.Kind")


def literal_kinds(node: ast.expr) -> set[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} if node.value in RESOURCES else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        found = [literal_kinds(e) for e in node.elts]
        if found and all(f is not None for f in found):
            return set().union(*found)
    return None


