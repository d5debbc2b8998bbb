"""The two renderings of a :class:`vgpu_kubectl.inspect.Report`: an aligned table for
people and JSON for programs.

When a node's agent publishes the links between its GPUs, the table gains a ``LINKS``
column: each GPU's fastest link and the GPUs it reaches that fast (``NV12(1)``: twelve
NVLinks to GPU 1; ``NVS18(all)``: the NVSwitch fabric to every other GPU; ``PIX(1)``: one
PCIe switch), and ``topology`` adds each node's full matrix as ``nvidia-smi topo -m``
prints it. Nodes whose links are unknown (older agents, fake files without links) show
``unknown``.

A GPU that is one fault domain (MPS, or no isolation) and holds a pod that keeps to its
namespace shows whom it still takes beside its mode (``mps (ml only)``); ``details`` marks
such pods ``fault-domain=namespace``. An MPS GPU shows the user its server serves
(``mps (uid 1000)``). Below the table, one line per node says what its isolation holds
(memory, compute, fault domains, users), how its mode was chosen and why it runs less.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from vgpu import node_isolation
from vgpu.topology.codec import encode_links
from vgpu.topology.links import LinkMatrix, label, matrix
from vgpu_kubectl.inspect import GpuRow, NodeRow, Report


def _percent(part: int, whole: int) -> str:
    return f"{100 * part // whole}%" if whole else "-"


def _health(node: NodeRow, gpu: GpuRow) -> str:
    health = "healthy" if gpu.device.healthy else "unhealthy"
    # The scheduler places nothing on a node whose heartbeat expired, whatever its GPUs say.
    return f"{health}, node stale" if node.stale else health


def _isolation(gpu: GpuRow) -> str:
    notes = [n for n in (gpu.fault_domain if gpu.fault_domain not in (None, "", "any")
                         else None, gpu.mps_user or None) if n]
    return gpu.device.isolation if not notes else (
        f"{gpu.device.isolation} ({'; '.join(notes)})")


def isolation_line(node: NodeRow) -> str:
    """What the node's isolation holds, how its mode was chosen, and why it runs less."""
    modes = sorted({g.device.isolation for g in node.gpus})
    head = f"  {node.name}: {', '.join(modes) or 'no GPUs'}"
    chosen = node.isolation
    if chosen is not None and (chosen.auto or chosen.configured not in modes):
        head += f" ({'auto chose' if chosen.auto else 'configured'} {chosen.configured})"
    line = f"{head}: {node.enforced}"
    if chosen is not None and chosen.problem:
        line += f"; {chosen.problem}"
    return line


def _matrix(node: NodeRow) -> LinkMatrix | None:
    if node.links is None:
        return None
    return matrix([g.device.uuid for g in node.gpus], node.links)


def fastest_links(node: NodeRow) -> list[str]:
    """Per GPU row, its fastest link and the GPUs (indexes) it reaches that fast."""
    m = _matrix(node)
    if m is None:
        return ["unknown"] * len(node.gpus)
    out = []
    for p, row in enumerate(m.ranks):
        others = [q for q in range(len(row)) if q != p]
        if not others:
            out.append("-")
            continue
        best = max(row[q] for q in others)
        peers = [q for q in others if row[q] == best]
        reach = "all" if len(peers) == len(others) else ",".join(
            str(node.gpus[q].device.index) for q in peers)
        out.append(f"{label(m.links[p][peers[0]])}({reach})")
    return out


def topology_lines(node: NodeRow) -> list[str]:
    """The node's links as ``nvidia-smi topo -m`` lays them out; none when unknown."""
    m = _matrix(node)
    if m is None or len(node.gpus) < 2:
        return []
    names = [f"GPU{g.device.index}" for g in node.gpus]
    rows: list[tuple[str, ...]] = [("", *names)]
    for p, name in enumerate(names):
        rows.append((name, *("X" if p == q else label(m.links[p][q])
                             for q in range(len(names)))))
    return [f"Links on {node.name}:", *(f"  {line}" for line in _table(rows))]


def to_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON values (pods always included)."""
    t = report.totals
    return {
        "nodes": [{
            "name": n.name,
            "heartbeat": n.heartbeat.astimezone(dt.UTC).isoformat() if n.heartbeat else None,
            "stale": n.stale,
            "gpus": [{
                "uuid": g.device.uuid, "index": g.device.index, "model": g.device.model,
                "healthy": g.device.healthy, "isolation": g.device.isolation,
                "memoryMiB": g.device.memory_mib, "memoryCapacityMiB": g.capacity_mib,
                "memoryAllocatedMiB": g.usage.memory_mib,
                "cores": g.device.cores, "coresAllocated": g.usage.cores,
                "tasks": g.usage.tasks, "split": g.device.split,
                # Whom its fault domain still takes; null: each pod's faults are its own.
                "faultDomain": g.fault_domain,
                # Whom its MPS server serves; null: not an MPS GPU.
                "mpsUser": g.mps_user,
                "pods": [{"namespace": p.namespace, "name": p.pod, "container": p.container,
                          "memoryMiB": p.memory_mib, "cores": p.cores,
                          "bindPhase": p.bind_phase, "faultDomain": p.fault_domain}
                         for p in g.pods],
            } for g in n.gpus],
            # The inventory's own form (docs/contracts.md#node-inventory); null: unknown.
            "links": None if n.links is None else encode_links(n.links),
            "isolation": {"enforced": n.enforced,
                          **(node_isolation.encode(n.isolation) if n.isolation else {})},
        } for n in report.nodes],
        "totals": {
            "nodes": t.nodes, "gpus": t.gpus, "healthyGpus": t.healthy_gpus,
            "memoryCapacityMiB": t.memory_mib, "memoryAllocatedMiB": t.memory_allocated_mib,
            "cores": t.cores, "coresAllocated": t.cores_allocated,
            "tasks": t.tasks, "slots": t.slots, "pendingPods": t.pending_pods,
        },
        "warnings": [{"object": w.object, "message": w.message} for w in report.warnings],
    }


def render_json(report: Report) -> str:
    return json.dumps(to_json(report), indent=2)


_HEADER = ("NODE", "GPU", "MODEL", "MEMORY MiB (ALLOC/TOTAL)", "MEM%", "CORES", "TASKS",
           "ISOLATION", "HEALTH")


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def _with_links(row: tuple[str, ...], links: str | None) -> tuple[str, ...]:
    """The row with a LINKS cell before ISOLATION (``None``: the table has no such column)."""
    return row if links is None else (*row[:7], links, *row[7:])


def render_table(report: Report, details: bool = False, topology: bool = False) -> str:
    """Aligned columns, one row per GPU, a TOTAL row; with ``details`` the pods on each GPU
    follow their GPU's row, indented; with ``topology`` each node's links follow the
    table. The LINKS column is there when some node's links are known."""
    linked = any(n.links is not None for n in report.nodes)
    rows: list[tuple[str, ...]] = [_with_links(_HEADER, "LINKS" if linked else None)]
    # Detail lines do not take part in the column alignment; remember where they go.
    after: dict[int, list[str]] = {}
    for node in report.nodes:
        links = fastest_links(node) if linked else [None] * len(node.gpus)
        for i, gpu in enumerate(node.gpus):
            d, u = gpu.device, gpu.usage
            rows.append(_with_links((
                node.name if i == 0 else "", str(d.index), d.model,
                f"{u.memory_mib}/{gpu.capacity_mib}", _percent(u.memory_mib, gpu.capacity_mib),
                f"{u.cores}/{d.cores}", f"{u.tasks}/{d.split}", _isolation(gpu),
                _health(node, gpu)), links[i]))
            if details and gpu.pods:
                after[len(rows) - 1] = [
                    f"    {p.namespace}/{p.pod}  container={p.container}  "
                    f"memory={p.memory_mib}MiB  cores={p.cores}"
                    + (f"  phase={p.bind_phase}" if p.bind_phase else "")
                    + (f"  fault-domain={p.fault_domain}" if p.fault_domain != "any" else "")
                    for p in gpu.pods]
        if not node.gpus:
            rows.append(_with_links((node.name, "-", "(no GPUs)", "", "", "", "", "",
                                     "node stale" if node.stale else ""),
                                    "" if linked else None))
    t = report.totals
    rows.append(_with_links((
        "TOTAL", str(t.gpus), f"{t.nodes} nodes", f"{t.memory_allocated_mib}/{t.memory_mib}",
        _percent(t.memory_allocated_mib, t.memory_mib), f"{t.cores_allocated}/{t.cores}",
        f"{t.tasks}/{t.slots}", "", f"{t.healthy_gpus}/{t.gpus} healthy"),
        "" if linked else None))
    lines: list[str] = []
    for i, line in enumerate(_table(rows)):
        lines.append(line)
        lines.extend(after.get(i, ()))
    return "\n".join(lines + _below(report, topology))


def _below(report: Report, topology: bool) -> list[str]:
    """What follows the table: each node's isolation, its links, the pending pods, the
    warnings."""
    lines: list[str] = []
    if report.nodes:
        lines.append("Isolation per node (what holds each container to its slice):")
        lines.extend(isolation_line(node) for node in report.nodes)
    if topology:
        for node in report.nodes:
            lines.extend(topology_lines(node))
    lines.append(f"Pending GPU pods: {report.totals.pending_pods}")
    lines.extend(f"WARNING {w.object}: {w.message}" for w in report.warnings)
    return lines
