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

from tests.ops.api_reading import (
    BY_KIND,
    FIXED,
    IMPLEMENTS,
    PORT_METHODS,
    REVIEWS,
    UNIQUE,
    ApiCall,
    Module,
    Unresolved,
    closure,
    is_kind_type,
    kinds_of_annotation,
    last_name,
    literal_kinds,
    load,
    names_in,
)
from vgpu.cluster.resources import RESOURCES

__all__ = ["ApiCall", "Reader", "Unresolved", "calls_of"]


@dataclass
class Reader:
    """The calls of one component (the modules of :func:`closure`)."""

    modules: list[Module]
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

    def _calls_of(self, node: ast.Call, mod: Module) -> Iterator[ApiCall]:
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
        return last_name(func.value) in self._port_names

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
                    if names_in(node.annotation) & types:
                        names.add(node.arg.lstrip("_"))
                elif isinstance(node, ast.AnnAssign):
                    if names_in(node.annotation) & types:
                        names.add(last_name(node.target))
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    assigned.append((last_name(node.targets[0]), last_name(node.value)))
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
    def _where(node: ast.AST, mod: Module, what: str) -> str:
        return (f"{mod.name}:{getattr(node, 'lineno', '?')}: cannot tell which resource "
                f"{what} reaches ({ast.unparse(node)[:120]}); pass a literal plural or a "
                f"value declared as a Literal of plurals")

    def _in_port_implementation(self, node: ast.AST, mod: Module) -> bool:
        cls = mod.enclosing(node, (ast.ClassDef,))
        return isinstance(cls, ast.ClassDef) and cls.name in self._implementations

    # -- resolving the resource ----------------------------------------------------------

    def _must(self, expr: ast.expr, at: ast.AST, mod: Module) -> set[str]:
        kinds = self._kinds(expr, at, mod)
        if kinds is None:
            raise Unresolved(self._where(at, mod, "this informer"))
        return kinds

    def _kinds(self, expr: ast.expr, at: ast.AST, mod: Module) -> set[str] | None:
        literal = literal_kinds(expr)
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

    def _name(self, name: str, at: ast.AST, mod: Module) -> set[str] | None:
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

    def _bound_in(self, owner: ast.AST, name: str, mod: Module) -> set[str] | bool | None:
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
                declared = kinds_of_annotation(stmt.annotation, mod)
                if declared is not None:
                    return declared
                if stmt.value is not None and is_kind_type(stmt.annotation):
                    return self._kinds(stmt.value, stmt, mod)
                return None
        return False

    def _parameter(self, func: ast.FunctionDef | ast.AsyncFunctionDef, arg: ast.arg,
                   mod: Module, *, varargs: bool) -> set[str] | None:
        declared = kinds_of_annotation(arg.annotation, mod)
        if declared is not None:
            return declared
        if not is_kind_type(arg.annotation):
            return None
        return self._callers(func, arg, mod, varargs=varargs)

    def _callers(self, func: ast.FunctionDef | ast.AsyncFunctionDef, arg: ast.arg,
                 mod: Module, *, varargs: bool) -> set[str]:
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
                mod: Module, called: str, *, varargs: bool) -> set[str]:
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

    def _self_attribute(self, attr: str, at: ast.AST, mod: Module) -> set[str] | None:
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
                        declared = kinds_of_annotation(stmt.annotation, mod)
                        if declared is not None:
                            return declared
                    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) \
                        else None
                    if value is not None:
                        return self._kinds(value, stmt, mod)
        return None

    def _module_constant(self, name: str, mod: Module | None) -> set[str] | None:
        if mod is None:
            return None
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and stmt.target.id == name and stmt.value is not None:
                return literal_kinds(stmt.value) or kinds_of_annotation(stmt.annotation, mod)
            if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                return literal_kinds(stmt.value)
            if isinstance(stmt, ast.ImportFrom) and stmt.module:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        return self._module_constant(alias.name, load(stmt.module))
        return None

    @staticmethod
    def _imported_module(name: str, mod: Module) -> Module | None:
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        return load(f"{stmt.module}.{alias.name}")
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        return load(alias.name)
        return None


def calls_of(entry: str) -> dict[ApiCall, list[str]]:
    """Every API call the modules of ``entry`` (a ``vgpu`` subcommand's module) can make,
    with where each is made."""
    return {call: list(where) for call, where in _calls_of(entry).items()}


@functools.cache
def _calls_of(entry: str) -> dict[ApiCall, list[str]]:
    return Reader.of(entry).calls()
