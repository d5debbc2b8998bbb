"""The node-level ``isolation`` object of the node inventory (docs/contracts.md#node-inventory):
what the node's agent was configured to run, whether ``isolation.mode: auto`` chose it, and
why what runs now is less. Each GPU's ``isolation`` says what it runs now; this says what
the node runs toward, which the scheduler needs where the label or the cluster says ``auto``
(a node configured for MPS whose daemon is down runs ``hami-core`` for a while, and takes
MPS clients again once it is back)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.annotation_fields import boolean, obj, string
from vgpu.errors import CodecError

#: A problem is a sentence or two; longer text is cut where the agent writes it.
PROBLEM_CHARS = 500


@dataclass(frozen=True)
class NodeIsolation:
    #: The mode the agent runs toward: the label or ``isolation.mode``, ``auto`` resolved.
    configured: str
    #: ``isolation.mode: auto`` (or the label) chose ``configured``.
    auto: bool = False
    #: Why the GPUs run less than ``configured`` now (a library refused, the MPS daemon
    #: down); None when they run it.
    problem: str | None = None


def encode(node: NodeIsolation) -> dict[str, Any]:
    out: dict[str, Any] = {"configured": node.configured, "auto": node.auto}
    if node.problem is not None:
        out["problem"] = node.problem[:PROBLEM_CHARS]
    return out


def decode(raw: Any, where: str) -> NodeIsolation:
    """An open set of modes, as each GPU's ``isolation``: a mode a reader does not know
    counts as not enforcing."""
    item: Mapping[str, Any] = obj(raw, where)
    configured = string(item, "configured", where)
    auto = boolean(item, "auto", where) if "auto" in item else False
    problem = item.get("problem")
    if problem is not None and not isinstance(problem, str):
        raise CodecError(f"{where}.problem: expected a string")
    return NodeIsolation(configured, auto, problem[:PROBLEM_CHARS] if problem else None)
