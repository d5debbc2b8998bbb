"""The namespaces' GPU quotas: the part of ``vgpu inspect`` about ``ResourceQuota``.

A pure function from the cluster's ResourceQuotas and pods (plain API dicts) to one row
per quota that names a derived resource (``requests.vgpu.io/memory-mib``, ...): its hard
limits, what Kubernetes counts as used (the quota's status, kept by the quota controller)
and the pods charged against it now, as Kubernetes counts them (not ended, in its
namespace, in its scopes; :func:`vgpu.quota_charge.pod_charge`). Renderings: table lines for
people, JSON for programs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu import meta, quota_charge
from vgpu.errors import QuantityError
from vgpu.pods import is_terminated
from vgpu.quantity import parse_whole
from vgpu.quota_charge import Charge, pod_charge

#: How people read each derived name.
LABELS = {quota_charge.VGPUS: "vGPUs", quota_charge.MEMORY: "GPU memory MiB",
          quota_charge.CORES: "GPU cores %"}
_COMPUTE = ("cpu", "memory")


@dataclass(frozen=True)
class QuotaPod:
    namespace: str
    name: str
    charge: Charge
    phase: str


@dataclass(frozen=True)
class QuotaLine:
    """One derived resource of a quota: ``used`` is None until the quota controller has
    counted it (quota admission then refuses every pod it covers)."""

    resource: str
    hard: int
    used: int | None


@dataclass(frozen=True)
class QuotaRow:
    namespace: str
    name: str
    scopes: tuple[str, ...]
    lines: tuple[QuotaLine, ...]
    pods: tuple[QuotaPod, ...]

    @property
    def charged(self) -> Charge:
        total = quota_charge.NONE
        for pod in self.pods:
            total += pod.charge
        return total


def _whole(value: Any) -> int | None:
    try:
        return parse_whole(value)
    except QuantityError:
        return None


def _best_effort(pod: Mapping[str, Any]) -> bool:
    """Kubernetes' BestEffort class: no container names CPU or memory at all."""
    spec = meta.mapping(pod.get("spec"))
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            resources = meta.mapping(meta.mapping(container).get("resources"))
            for part in ("requests", "limits"):
                if any(name in meta.mapping(resources.get(part)) for name in _COMPUTE):
                    return False
    return True


def _scope_matches(scope: str, operator: str, values: Sequence[Any],
                   pod: Mapping[str, Any]) -> bool | None:
    """Whether the pod is in one scope (None: a scope this view does not know)."""
    spec = meta.mapping(pod.get("spec"))
    if scope in ("Terminating", "NotTerminating"):
        deadline = spec.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, int) and deadline >= 0
        return terminating if scope == "Terminating" else not terminating
    if scope in ("BestEffort", "NotBestEffort"):
        return _best_effort(pod) == (scope == "BestEffort")
    if scope == "PriorityClass":
        name = spec.get("priorityClassName") or None
        # A label selector over {PriorityClass: name}: NotIn holds for a pod without one.
        return {"In": name in values, "NotIn": name not in values,
                "Exists": name is not None, "DoesNotExist": name is None}.get(operator)
    return None


def _scope_terms(spec: Mapping[str, Any]) -> list[tuple[str, str, Sequence[Any]]]:
    terms: list[tuple[str, str, Sequence[Any]]] = [
        (str(s), "Exists", ()) for s in spec.get("scopes") or []]
    selector = meta.mapping(spec.get("scopeSelector"))
    for raw in selector.get("matchExpressions") or []:
        expr = meta.mapping(raw)
        terms.append((str(expr.get("scopeName", "")), str(expr.get("operator", "")),
                      list(expr.get("values") or [])))
    return terms


def _describe(term: tuple[str, str, Sequence[Any]]) -> str:
    scope, operator, values = term
    if operator in ("In", "NotIn"):
        return f"{scope} {operator} ({', '.join(map(str, values))})"
    return scope if operator == "Exists" else f"{scope} {operator}"


def _row(obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
         warnings: list[str]) -> QuotaRow | None:
    namespace, name = meta.namespace(obj) or "default", meta.name(obj)
    spec = meta.mapping(obj.get("spec"))
    hard = meta.mapping(spec.get("hard"))
    used = meta.mapping(meta.mapping(obj.get("status")).get("used"))
    lines = []
    for resource in quota_charge.NAMES:
        key = quota_charge.QUOTA_PREFIX + resource
        if key not in hard:
            continue
        limit = _whole(hard[key])
        if limit is None:
            warnings.append(f"ResourceQuota {namespace}/{name}: {key} is {hard[key]!r}, "
                            f"not a whole number")
            continue
        lines.append(QuotaLine(resource, limit, _whole(used[key]) if key in used else None))
    if not lines:
        return None
    terms = _scope_terms(spec)
    charged = []
    for pod in pods:
        if meta.namespace(pod) != namespace or is_terminated(pod):
            continue
        verdicts = [_scope_matches(s, op, values, pod) for s, op, values in terms]
        if None in verdicts:
            warnings.append(f"ResourceQuota {namespace}/{name}: a scope this view does not "
                            f"know; its pods are not listed")
            break
        if all(verdicts):
            charge = pod_charge(pod)
            if charge != quota_charge.NONE:
                phase = str(meta.mapping(pod.get("status")).get("phase") or "Pending")
                charged.append(QuotaPod(namespace, meta.name(pod), charge, phase))
    charged.sort(key=lambda p: p.name)
    return QuotaRow(namespace, name, tuple(_describe(t) for t in terms), tuple(lines),
                    tuple(charged))


def build(quotas: Iterable[Mapping[str, Any]],
          pods: Iterable[Mapping[str, Any]]) -> tuple[tuple[QuotaRow, ...], tuple[str, ...]]:
    """One row per ResourceQuota naming a derived resource, by namespace and name, and
    the warnings about what could not be read."""
    pod_list = list(pods)
    warnings: list[str] = []
    rows = [row for obj in quotas if (row := _row(obj, pod_list, warnings)) is not None]
    rows.sort(key=lambda r: (r.namespace, r.name))
    return tuple(rows), tuple(warnings)


def _amount(value: int | None) -> str:
    return "?" if value is None else str(value)


def render_lines(rows: Sequence[QuotaRow], details: bool = False) -> list[str]:
    """The quota section of the table; with ``details`` the pods charged to each quota."""
    if not rows:
        return []
    table: list[tuple[str, ...]] = [("NAMESPACE", "QUOTA", "RESOURCE", "USED/HARD", "PODS",
                                     "SCOPES")]
    after: dict[int, list[str]] = {}
    for row in rows:
        for i, line in enumerate(row.lines):
            first = i == 0
            table.append((row.namespace if first else "", row.name if first else "",
                          LABELS[line.resource], f"{_amount(line.used)}/{line.hard}",
                          str(len(row.pods)) if first else "",
                          ", ".join(row.scopes) if first else ""))
        if details and row.pods:
            after[len(table) - 1] = [
                f"    {p.namespace}/{p.name}  vgpus={p.charge.vgpus}  "
                f"memory={p.charge.memory_mib}MiB  cores={p.charge.cores}%  ({p.phase})"
                for p in row.pods]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    out: list[str] = []
    for i, cells in enumerate(table):
        out.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
        out.extend(after.get(i, ()))
    return out


def to_json(rows: Sequence[QuotaRow]) -> list[dict[str, Any]]:
    return [{
        "namespace": r.namespace, "name": r.name, "scopes": list(r.scopes),
        "resources": {line.resource: {"hard": line.hard, "used": line.used}
                      for line in r.lines},
        "pods": [{"namespace": p.namespace, "name": p.name, "phase": p.phase,
                  **p.charge.by_name()}
                 for p in r.pods],
    } for r in rows]
