"""The links of a node inventory on the wire (docs/contracts.md#node-inventory, version 3).

``"links": [{"gpus": ["GPU-a", "GPU-b"], "pcie": "socket", "nvlinks": 12,
"generation": 3, "nvswitch": false}, ...]``: one entry per pair of listed GPUs the agent
knows the link of. The inventory's codec (:mod:`vgpu.codecs`) calls these; decoding is as
strict as the rest of the inventory, since a misread link would place a pod on slow GPUs
while it asked for fast ones.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Any

from vgpu import limits
from vgpu.annotation_fields import boolean, integer, obj, string
from vgpu.errors import CodecError
from vgpu.topology.links import PCIE_LEVELS, GpuLink, Link


def link_to_dict(item: GpuLink) -> dict[str, Any]:
    link = item.link
    return {"gpus": [item.a, item.b], "pcie": link.pcie, "nvlinks": link.nvlinks,
            "generation": link.generation, "nvswitch": link.nvswitch}


def encode_links(links: Iterable[GpuLink]) -> list[dict[str, Any]]:
    """The wire list, pairs in a stable order (the inventory's text changes only when a
    link does)."""
    ordered = sorted(links, key=lambda g: tuple(sorted((g.a, g.b))))
    return [link_to_dict(g) for g in ordered]


def _gpus(entry: Any, where: str, known: Collection[str]) -> tuple[str, str]:
    raw = entry.get("gpus")
    if (not isinstance(raw, list) or len(raw) != 2
            or not all(isinstance(u, str) and u for u in raw)):
        raise CodecError(f"{where}.gpus: expected two GPU UUIDs, got {json.dumps(raw)[:60]}")
    a, b = raw
    if a == b:
        raise CodecError(f"{where}.gpus: a GPU cannot link to itself ({a})")
    for uuid in (a, b):
        if uuid not in known:
            raise CodecError(f"{where}.gpus: {uuid} is not a GPU of the inventory")
    return a, b


def _optional(entry: Any, name: str, where: str, default: Any, hi: int = 0) -> Any:
    if name not in entry:
        return default
    if isinstance(default, bool):
        return boolean(entry, name, where)
    return integer(entry, name, where, hi=hi)


def decode_links(raw: Any, where: str, known: Collection[str]) -> tuple[GpuLink, ...]:
    """The links of ``raw`` (the inventory's ``links`` value) among the GPUs ``known``."""
    if not isinstance(raw, list):
        raise CodecError(f"{where}: expected a list")
    out: list[GpuLink] = []
    seen: set[frozenset[str]] = set()
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        entry = obj(item, at)
        a, b = _gpus(entry, at, known)
        pcie = string(entry, "pcie", at)
        if pcie not in PCIE_LEVELS:
            raise CodecError(f"{at}.pcie: {pcie!r} is not one of {', '.join(PCIE_LEVELS)}")
        link = Link(pcie=pcie, nvlinks=_optional(entry, "nvlinks", at, 0, limits.NVLINKS),
                    generation=_optional(entry, "generation", at, 0,
                                         limits.NVLINK_GENERATION),
                    nvswitch=_optional(entry, "nvswitch", at, False))
        pair = frozenset((a, b))
        if pair in seen:
            raise CodecError(f"{at}.gpus: the pair {a}, {b} appears twice")
        seen.add(pair)
        out.append(GpuLink(a, b, link))
    return tuple(out)
