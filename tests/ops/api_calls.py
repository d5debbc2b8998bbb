"""Every Kubernetes API call a component's code can make, read from the code itself.

What the RBAC of ``manifests/`` is checked against (``test_manifests_rbac``): no list kept
by hand, so a new call without its right, or a right no call uses any more, fails a test.

A component is the modules its ``vgpu`` subcommand's entry point imports (transitively,
within the product; imports made only under ``TYPE_CHECKING`` do not run and do not
count). Its calls are the calls of the cluster port's methods (:mod:`vgpu.cluster.port`),
``Informer`` (a list and a watch) and the delegated-auth reviews of the metrics servers,
each mapped to the request the real adapter (:mod:`vgpu.kube`) sends: ``replace`` is an
``update``, ``patch_annotations(..., status=True)`` a patch of ``<resource>/status``,
``bind`` a create of ``pods/binding``, ``evict`` one of ``pods/eviction``,
``record_event`` one of core ``events``.

Which resource a call reaches is read from its first argument: a literal, or a name whose
declared type (``Kind``, a ``Literal`` of plurals, a constant of such a type) says it;
a parameter typed ``Kind`` is followed to every call of its function in the component
(``Informer(port, "pods")``, ``handle.lister("services")``). mypy --strict holds those
declarations true. A call whose resource cannot be told this way is an :class:`Unresolved`
error naming the line, never a silent omission. The classes that implement the port
(the adapters, wrappers such as the scheduler's event recorder) forward calls and make
none of their own, so their bodies are skipped.
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
class _Module:
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


def _last_name(node: ast.expr) -> str:
    """``x`` of ``a.b._x`` and of ``x``, without leading underscores; "" otherwise."""
    if isinstance(node, ast.Attribute):
        return node.attr.lstrip("_")
    if isinstance(node, ast.Name):
        return node.id.lstrip("_")
    return ""


def _names(node: ast.expr) -> set[str]:
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
def _load(module: str) -> _Module | None:
    path = _path(module)
    if path is None:
        return None
    return _Module(module, ast.parse(path.read_text(), str(path)))


def _imports(mod: _Module) -> Iterator[str]:
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


def closure(entry: str) -> list[_Module]:
    """The product modules ``entry`` runs: it and everything it imports, transitively
    (a package's ``__init__`` with each of its modules imported)."""
    seen: dict[str, _Module] = {}
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen or not _product(name):
            continue
        mod = _load(name)
        if mod is None:
            continue
        seen[name] = mod
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [m for m in _imports(mod) if _product(m)]
    return sorted(seen.values(), key=lambda m: m.name)


# -- what a kind expression can be -----------------------------------------------------


def _kinds_of_annotation(node: ast.expr | None, mod: _Module) -> set[str] | None:
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
                return _kinds_of_annotation(stmt.value, mod)
    return None


def _is_kind_type(node: ast.expr | None) -> bool:
    return node is not None and ast.unparse(node) in ("Kind", "port.Kind")


def _literal_kinds(node: ast.expr) -> set[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} if node.value in RESOURCES else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        found = [_literal_kinds(e) for e in node.elts]
        if found and all(f is not None for f in found):
            return set().union(*found)
    return None


@dataclass
class Reader:
    """The calls of one component (the modules of :func:`closure`)."""

    modules: list[_Module]
    _following: set[tuple[str, str, str]] = field(default_factory=set)
    _followed: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, entry: str) -> Reader:
        return cls(closure(entry))

    # -- the public answer ---------------------------------------------------------------

    def calls(self) -> dict[ApiCall, list[str]]:
        """Every API call, with where in the code it is made (module:line)."""
        out: dict[ApiCall, list[str]] = {}
        for mod in self.modules:
            for node in ast.walk(mod.tree):
                if not isinstance(node, ast.Call) or self._in_port_implementation(node, mod):
                    continue
                for call in self._calls_of(node, mod):
                    out.setdefault(call, []).append(f"{mod.name}:{node.lineno}")
        return out

    # -- one call expression -------------------------------------------------------------

    def _calls_of(self, node: ast.Call, mod: _Module) -> Iterator[ApiCall]:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        if name == "Informer" and node.args[1:]:
            for kind in self._must(node.args[1], node, mod):
                res = RESOURCES[kind]
                yield ApiCall(res.group, kind, "", "list")
                yield ApiCall(res.group, kind, "", "watch")
        elif name in REVIEWS and isinstance(func, ast.Attribute):
            yield ApiCall(*REVIEWS[name])
        elif name in FIXED and isinstance(func, ast.Attribute):
            arity, call = FIXED[name]
            if len(node.args) == arity and (name in UNIQUE or self._looks_like_port(func)):
                yield ApiCall(*call)
        elif name in BY_KIND and isinstance(func, ast.Attribute) and node.args:
            if name not in UNIQUE and not self._looks_like_port(func):
                return  # a dict's get, a list's ...: not the port
            kinds = self._kinds(node.args[0], node, mod)
            if kinds is None and isinstance(node.args[0], ast.Constant):
                return  # a container port's get("hostPort"): a string no plural is
            if kinds is None:
                raise Unresolved(self._where(node, mod, "a port call"))
            verb, sub = BY_KIND[name]
            for kind in kinds:
                res = RESOURCES[kind]
                for sub_ in self._subresources(name, node, sub):
                    yield ApiCall(res.group, kind, sub_, verb)

    @staticmethod
    def _subresources(name: str, node: ast.Call, sub: str) -> tuple[str, ...]:
        if name != "patch_annotations":
            return (sub,)
        status = next((k.value for k in node.keywords if k.arg == "status"), None)
        if status is None:
            return ("",)
        if isinstance(status, ast.Constant):
            return ("status",) if status.value else ("",)
        return ("", "status")  # decided at run time: either

    def _looks_like_port(self, func: ast.Attribute) -> bool:
        """Whether the receiver holds the port: a name the component declares a port
        under, or one assigned from such a name."""
        return _last_name(func.value) in self._port_names

    @functools.cached_property
    def _port_names(self) -> set[str]:
        """Every name (parameter, variable, attribute; leading underscores dropped) the
        component's code declares with a port type (``ClusterPort``, an implementing
        class), and every name assigned from one of those."""
        types = {"ClusterPort", *self._implementations}
        names: set[str] = set()
        assigned: list[tuple[str, str]] = []
        for mod in self.modules:
            for node in ast.walk(mod.tree):
                if self._in_port_implementation(node, mod):
                    continue  # what a wrapper holds is the port's business, not a call
                if isinstance(node, ast.arg) and node.annotation is not None:
                    if _names(node.annotation) & types:
                        names.add(node.arg.lstrip("_"))
                elif isinstance(node, ast.AnnAssign):
                    if _names(node.annotation) & types:
                        names.add(_last_name(node.target))
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    assigned.append((_last_name(node.targets[0]), _last_name(node.value)))
        grew = True
        while grew:  # a = self._cluster; b = a: both hold it
            before = len(names)
            names |= {target for target, value in assigned if value in names and target}
            grew = len(names) > before
        names.discard("")
        return names

    @functools.cached_property
    def _implementations(self) -> set[str]:
        return {node.name for mod in self.modules for node in ast.walk(mod.tree)
                if isinstance(node, ast.ClassDef) and len(
                    {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                    & PORT_METHODS) >= IMPLEMENTS}

    @staticmethod
    def _where(node: ast.AST, mod: _Module, what: str) -> str:
        return (f"{mod.name}:{getattr(node, 'lineno', '?')}: cannot tell which resource "
                f"{what} reaches ({ast.unparse(node)[:120]}); pass a literal plural or a "
                f"value declared as a Literal of plurals")

    def _in_port_implementation(self, node: ast.AST, mod: _Module) -> bool:
        cls = mod.enclosing(node, (ast.ClassDef,))
        return isinstance(cls, ast.ClassDef) and cls.name in self._implementations

    # -- resolving the resource ----------------------------------------------------------

    def _must(self, expr: ast.expr, at: ast.AST, mod: _Module) -> set[str]:
        kinds = self._kinds(expr, at, mod)
        if kinds is None:
            raise Unresolved(self._where(at, mod, "this informer"))
        return kinds

    def _kinds(self, expr: ast.expr, at: ast.AST, mod: _Module) -> set[str] | None:
        literal = _literal_kinds(expr)
        if literal is not None:
            return literal
        if isinstance(expr, ast.Name):
            return self._name(expr.id, at, mod)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) \
                and expr.value.id == "self":
            return self._self_attribute(expr.attr, at, mod)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            return self._module_constant(expr.attr, self._imported_module(expr.value.id, mod))
        return None

    def _name(self, name: str, at: ast.AST, mod: _Module) -> set[str] | None:
        scope = at
        while True:
            owner = mod.enclosing(scope, (ast.FunctionDef, ast.AsyncFunctionDef,
                                          ast.ListComp, ast.SetComp,
                                          ast.DictComp, ast.GeneratorExp, ast.For))
            if owner is None:
                return self._module_constant(name, mod)
            found = self._bound_in(owner, name, mod)
            if found is not False:
                return found
            scope = owner

    def _bound_in(self, owner: ast.AST, name: str, mod: _Module) -> set[str] | bool | None:
        """What ``name`` is where ``owner`` binds it; False when it does not bind it."""
        generators = getattr(owner, "generators", None)
        if generators is not None:
            for gen in generators:
                if isinstance(gen.target, ast.Name) and gen.target.id == name:
                    return self._kinds(gen.iter, owner, mod)
            return False
        if isinstance(owner, ast.For):
            if isinstance(owner.target, ast.Name) and owner.target.id == name:
                return self._kinds(owner.iter, owner, mod)
            return False
        assert isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef))
        args = owner.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        for arg in params:
            if arg.arg == name:
                return self._parameter(owner, arg, mod, varargs=False)
        if args.vararg is not None and args.vararg.arg == name:
            return self._parameter(owner, args.vararg, mod, varargs=True)
        for stmt in ast.walk(owner):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.target.id == name:
                declared = _kinds_of_annotation(stmt.annotation, mod)
                if declared is not None:
                    return declared
                if stmt.value is not None and _is_kind_type(stmt.annotation):
                    return self._kinds(stmt.value, stmt, mod)
                return None
        return False

    def _parameter(self, func: ast.FunctionDef | ast.AsyncFunctionDef, arg: ast.arg,
                   mod: _Module, *, varargs: bool) -> set[str] | None:
        declared = _kinds_of_annotation(arg.annotation, mod)
        if declared is not None:
            return declared
        if not _is_kind_type(arg.annotation):
            return None
        return self._callers(func, arg, mod, varargs=varargs)

    def _callers(self, func: ast.FunctionDef | ast.AsyncFunctionDef, arg: ast.arg,
                 mod: _Module, *, varargs: bool) -> set[str]:
        """Every value the component's code passes for parameter ``arg`` of ``func``."""
        cls = mod.enclosing(func, (ast.ClassDef,))
        called = cls.name if func.name == "__init__" and isinstance(cls, ast.ClassDef) \
            else func.name
        key = (mod.name, called, arg.arg)
        if key in self._followed:
            return self._followed[key]
        if key in self._following:
            return set()  # a recursion's other calls say the rest
        self._following.add(key)
        try:
            found = self._followed[key] = self._passed(func, arg, mod, called, varargs=varargs)
        finally:
            self._following.discard(key)
        return found

    def _passed(self, func: ast.FunctionDef | ast.AsyncFunctionDef, arg: ast.arg,
                mod: _Module, called: str, *, varargs: bool) -> set[str]:
        cls = mod.enclosing(func, (ast.ClassDef,))
        params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        if isinstance(cls, ast.ClassDef) and params and params[0] in ("self", "cls"):
            params = params[1:]
        position = len(params) if varargs else params.index(arg.arg) \
            if arg.arg in params else None
        found: set[str] = set()
        defaults = dict(zip(reversed(params), reversed(func.args.defaults), strict=False))
        if arg.arg in defaults:
            found |= self._kinds(defaults[arg.arg], func, mod) or set()
        for other in self.modules:
            for node in ast.walk(other.tree):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else \
                    f.id if isinstance(f, ast.Name) else ""
                if name != called or self._in_port_implementation(node, other):
                    continue
                values = [k.value for k in node.keywords if k.arg == arg.arg]
                if position is not None:
                    values += node.args[position:] if varargs else node.args[position:position + 1]
                for passed in values:
                    value = passed.value if isinstance(passed, ast.Starred) else passed
                    kinds = self._kinds(value, node, other)
                    if kinds is None:
                        raise Unresolved(self._where(node, other, f"{called}({arg.arg}=...)"))
                    found |= kinds
        return found

    def _self_attribute(self, attr: str, at: ast.AST, mod: _Module) -> set[str] | None:
        cls = mod.enclosing(at, (ast.ClassDef,))
        if not isinstance(cls, ast.ClassDef):
            return None
        for stmt in ast.walk(cls):
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == attr and \
                        isinstance(t.value, ast.Name) and t.value.id == "self":
                    if isinstance(stmt, ast.AnnAssign):
                        declared = _kinds_of_annotation(stmt.annotation, mod)
                        if declared is not None:
                            return declared
                    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) \
                        else None
                    if value is not None:
                        return self._kinds(value, stmt, mod)
        return None

    def _module_constant(self, name: str, mod: _Module | None) -> set[str] | None:
        if mod is None:
            return None
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.target.id == name and stmt.value is not None:
                return _literal_kinds(stmt.value) or _kinds_of_annotation(stmt.annotation, mod)
            if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                return _literal_kinds(stmt.value)
            if isinstance(stmt, ast.ImportFrom) and stmt.module:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        return self._module_constant(alias.name, _load(stmt.module))
        return None

    @staticmethod
    def _imported_module(name: str, mod: _Module) -> _Module | None:
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        return _load(f"{stmt.module}.{alias.name}")
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        return _load(alias.name)
        return None


def calls_of(entry: str) -> dict[ApiCall, list[str]]:
    """Every API call the modules of ``entry`` (a ``vgpu`` subcommand's module) can make,
    with where each is made."""
    return {call: list(where) for call, where in _calls_of(entry).items()}


@functools.cache
def _calls_of(entry: str) -> dict[ApiCall, list[str]]:
    return Reader.of(entry).calls()
