"""Fault domains: whom a GPU pod may share a GPU's faults with (docs/isolation.md#fault-domains).

On MPS a GPU is one fault domain: a client that faults (``cudaErrorIllegalAddress``) ends
the work of the other clients of the same MPS server on that GPU, mid-kernel (measured on an
H100, docs/isolation.md#measurements). With no isolation nothing holds a neighbour to its
memory, so one pod can starve another the same way. Only a mode that gives every process
its own context *and* holds its memory (``hami-core``) keeps a pod's failure its own.

A pod says whom it trusts with that with ``vgpu.io/fault-domain``: ``any`` pod, or only pods
of its own ``namespace``; without the annotation, the operator's default for its namespace
(``isolation.faultDomains``). Two pods may share a GPU whose mode is a shared fault domain
only when **each** trusts the other: the annotation is the pod's own statement, and a pod
that says ``any`` must not land beside one that said ``namespace`` in another namespace.

Pure: parsing and decisions only. The scheduler's ``FaultDomain`` plugin, ``vgpu why`` and
``vgpu inspect`` read the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vgpu.errors import RequestError
from vgpu.isolation_modes import HAMI_CORE

#: Pod annotation: whom the pod may share a fault domain with.
ANNOTATION = "vgpu.io/fault-domain"
ANY = "any"
NAMESPACE = "namespace"
SCOPES = (ANY, NAMESPACE)

#: Modes that keep a pod's GPU faults and memory to itself. Every other mode, including
#: one this vgpu does not know (an open set, as in the inventory), shares faults: the safe
#: reading of a mode nobody measured.
SEPARATE_MODES = frozenset({HAMI_CORE})


def shared(mode: str) -> bool:
    """Whether the pods on a GPU running ``mode`` share one fault domain."""
    return mode not in SEPARATE_MODES


@dataclass(frozen=True, slots=True)
class Tenant:
    """A pod as fault domains see it: where it runs from and whom it trusts."""

    namespace: str
    scope: str
    #: The pod's uid: a pod always shares a domain with itself (two of its containers on
    #: one GPU).
    uid: str = ""


def trusts(a: Tenant, b: Tenant) -> bool:
    """Whether ``a`` accepts ``b`` in its fault domain. A scope this vgpu does not know
    (written by a newer one) trusts no other pod: the stricter reading."""
    if a.scope == ANY:
        return True
    if a.scope == NAMESPACE:
        return a.namespace == b.namespace
    return False


def compatible(a: Tenant, b: Tenant) -> bool:
    """Whether ``a`` and ``b`` may share a GPU that is one fault domain: each trusts the
    other (or they are one pod)."""
    return (bool(a.uid) and a.uid == b.uid) or (trusts(a, b) and trusts(b, a))


def parse_scope(value: object, where: str = ANNOTATION) -> str:
    """A scope as written (trimmed, case-insensitive); raises :class:`RequestError`."""
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text not in SCOPES:
        raise RequestError(f"{where}: {value!r} is not a fault domain; use one of "
                           f"{', '.join(SCOPES)}")
    return text


def stated(annotations: Mapping[str, str] | None) -> str | None:
    """The scope the pod's annotation states; None without one. Raises
    :class:`RequestError` for a value that is not a scope."""
    value = (annotations or {}).get(ANNOTATION)
    return None if value is None else parse_scope(value)


@dataclass(frozen=True)
class Defaults:
    """The operator's scopes for pods without the annotation: per namespace, else one
    for the cluster."""

    default: str = ANY
    namespaces: Mapping[str, str] = field(default_factory=dict)

    def scope_of(self, namespace: str) -> str:
        return self.namespaces.get(namespace, self.default)


def parse_namespace_defaults(entries: Iterable[str]) -> dict[str, str]:
    """``<namespace>=<scope>`` entries (``isolation.faultDomains.namespaceDefaults``) as a
    mapping; raises :class:`RequestError` naming the entry that is not one."""
    out: dict[str, str] = {}
    for entry in entries:
        namespace, sep, scope = entry.partition("=")
        namespace = namespace.strip()
        if not sep or not namespace:
            raise RequestError(f"{entry!r} is not <namespace>=<scope>")
        if namespace in out:
            raise RequestError(f"namespace {namespace!r} is named twice")
        out[namespace] = parse_scope(scope, f"{entry!r}")
    return out


def effective(annotations: Mapping[str, str] | None, namespace: str,
              defaults: Defaults) -> tuple[str, bool]:
    """The pod's scope now and whether its annotation stated it (else the operator's
    default). Raises :class:`RequestError` for an unreadable annotation."""
    scope = stated(annotations)
    if scope is not None:
        return scope, True
    return defaults.scope_of(namespace), False


def held(recorded: str | None, namespace: str, defaults: Defaults) -> str:
    """The scope a placed pod holds: what vgpu recorded at its placement (its annotation
    then, in the assignment), else the operator's default for its namespace. Never the
    annotation as it reads now: a pod's owner can edit that after the placement."""
    return recorded if recorded is not None else defaults.scope_of(namespace)


def gpu_shares_faults(reported: str, configured: str) -> bool:
    """Whether a GPU is one fault domain: by the mode its agent reports now, or the mode
    its node is configured for. A node configured for MPS whose daemon is down reports
    ``hami-core`` for now, and its next pods are MPS clients again once the daemon is back,
    beside the ones placed meanwhile."""
    return shared(reported) or shared(configured)


def blocker(me: Tenant, occupants: Iterable[Tenant]) -> Tenant | None:
    """The first pod among ``occupants`` that ``me`` may not share a fault domain with."""
    for other in occupants:
        if not compatible(me, other):
            return other
    return None


def guard(occupants: Iterable[Tenant]) -> str:
    """Who else a GPU's fault domain still takes, as ``vgpu inspect`` shows it: ``any`` (every
    pod there trusts anyone), ``<namespace> only``, or nothing when it holds no pod."""
    tenants = list(occupants)
    if not tenants:
        return ""
    closed = sorted({t.namespace for t in tenants if t.scope != ANY})
    if not closed:
        return ANY
    return f"{', '.join(closed)} only"
