"""The ``links`` of a fake-devices file: how its GPUs talk to each other.

Each entry names GPUs by index (or ``all``) and says what links every pair among them::

    links:
    - {gpus: all, pcie: system}                       # across the two sockets
    - {gpus: [0, 1, 2, 3], pcie: socket}              # one socket
    - {gpus: [0, 1], pcie: switch, nvlinks: 12, generation: 3}

A pair takes, over the entries naming both its GPUs, the closest ``pcie`` ancestor, the
most ``nvlinks``, the newest ``generation``, and ``nvswitch`` when any says so; a pair no
``pcie`` reaches is ``socket`` when both GPUs give the same NUMA node, ``system`` when they
give different ones, else ``unknown``. A file without ``links`` publishes no topology (the
scheduler then treats the node's topology as unknown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.errors import DiscoveryError
from vgpu.topology.links import PCIE_LEVELS, SOCKET, SYSTEM, UNKNOWN, GpuLink, Link
from vgpu_nodeagent.devices.discovery import NUMA_UNKNOWN, GpuFacts

_KEYS = {"gpus", "pcie", "nvlinks", "generation", "nvswitch"}
#: More than any GPU has (NVML_NVLINK_MAX_LINKS is 36), to catch typos, not hardware.
MAX_NVLINKS = 64
MAX_GENERATION = 16


def _indexes(raw: Any, where: str, known: Mapping[int, GpuFacts]) -> list[int]:
    if raw == "all":
        return sorted(known)
    if not isinstance(raw, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in raw):
        raise DiscoveryError(f"{where}.gpus: expected a list of device indexes or 'all'")
    for i in raw:
        if i not in known:
            raise DiscoveryError(f"{where}.gpus: no device has index {i}")
    if len(set(raw)) != len(raw):
        raise DiscoveryError(f"{where}.gpus: an index appears twice")
    if len(raw) < 2:
        raise DiscoveryError(f"{where}.gpus: a link needs at least two GPUs")
    return list(raw)


def _number(entry: Mapping[str, Any], key: str, where: str, hi: int) -> int:
    value = entry.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= hi:
        raise DiscoveryError(f"{where}.{key}: expected an integer between 0 and {hi}, "
                             f"got {value!r}")
    return value


def _entry(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, Mapping):
        raise DiscoveryError(f"{where}: expected a mapping")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise DiscoveryError(f"{where}.{unknown[0]}: unknown key; allowed: "
                             f"{', '.join(sorted(_KEYS))}")
    pcie = entry.get("pcie")
    if pcie is not None and pcie not in PCIE_LEVELS:
        raise DiscoveryError(f"{where}.pcie: {pcie!r} is not one of {', '.join(PCIE_LEVELS)}")
    nvswitch = entry.get("nvswitch", False)
    if not isinstance(nvswitch, bool):
        raise DiscoveryError(f"{where}.nvswitch: expected true or false, got {nvswitch!r}")
    nvlinks = _number(entry, "nvlinks", where, MAX_NVLINKS)
    if nvswitch and not nvlinks:
        raise DiscoveryError(f"{where}.nvswitch: give the GPUs' links to the switches as "
                             f"nvlinks")
    return {"pcie": pcie, "nvlinks": nvlinks,
            "generation": _number(entry, "generation", where, MAX_GENERATION),
            "nvswitch": nvswitch}


def _numa_pcie(a: GpuFacts, b: GpuFacts) -> str:
    if NUMA_UNKNOWN in (a.numa, b.numa):
        return UNKNOWN
    return SOCKET if a.numa == b.numa else SYSTEM


def parse_links(raw: Any, source: str, facts: Sequence[GpuFacts]) -> tuple[GpuLink, ...]:
    """The links the ``links`` value ``raw`` gives the GPUs ``facts``."""
    if not isinstance(raw, list):
        raise DiscoveryError(f"{source}: links: expected a list")
    known = {f.index: f for f in facts}
    merged: dict[tuple[int, int], dict[str, Any]] = {}
    for n, item in enumerate(raw):
        where = f"{source}: links[{n}]"
        fields = _entry(item, where)
        indexes = sorted(_indexes(item.get("gpus"), where, known))
        for x, i in enumerate(indexes):
            for j in indexes[x + 1:]:
                pair = merged.setdefault((i, j), {"pcie": None, "nvlinks": 0,
                                                  "generation": 0, "nvswitch": False})
                if fields["pcie"] is not None and (pair["pcie"] is None or PCIE_LEVELS.index(
                        fields["pcie"]) > PCIE_LEVELS.index(pair["pcie"])):
                    pair["pcie"] = fields["pcie"]
                for key in ("nvlinks", "generation"):
                    pair[key] = max(pair[key], fields[key])
                pair["nvswitch"] = pair["nvswitch"] or fields["nvswitch"]
    out = []
    indexes = sorted(known)
    for x, i in enumerate(indexes):
        for j in indexes[x + 1:]:
            a, b = known[i], known[j]
            pair = merged.get((i, j), {})
            out.append(GpuLink(a.uuid, b.uuid, Link(
                pcie=pair.get("pcie") or _numa_pcie(a, b), nvlinks=pair.get("nvlinks", 0),
                generation=pair.get("generation", 0), nvswitch=pair.get("nvswitch", False))))
    return tuple(out)
