"""Named node topologies for any GPU count: the shipped fake-GPU examples and the
simulator's topology-carrying nodes are built from these.

* ``nvswitch``: every GPU on the NVSwitch fabric (18 NVLink 4 links each, an HGX H100):
  all pairs alike;
* ``pcie``: PCIe only, half the GPUs on each of two CPU sockets, two GPUs under each
  PCIe switch (one socket below four GPUs);
* ``nvlink-pairs``: ``pcie`` with each switch's two GPUs also joined by an NVLink bridge
  (12 NVLink 3 links, as A100 PCIe cards);
* ``mixed``: the first half of the GPUs NVLinked to each other (12 links within each
  switch's pair, 4 between pairs) on one socket, the second half PCIe-only on the other.

GPUs are numbered by index; :func:`links_of` gives the links of a shape between GPUs
named by UUID, in index order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vgpu.topology.links import SOCKET, SWITCH, SYSTEM, GpuLink, Link


@dataclass(frozen=True)
class Shape:
    """A topology for ``n`` GPUs: each GPU's NUMA node, and the link of each pair
    ``(i, j)``, ``i < j``."""

    numa: tuple[int, ...]
    links: Mapping[tuple[int, int], Link]


def _socket(i: int, n: int) -> int:
    return i * 2 // n if n >= 4 else 0


def _pcie(i: int, j: int, n: int) -> str:
    if _socket(i, n) != _socket(j, n):
        return SYSTEM
    return SWITCH if i // 2 == j // 2 else SOCKET


def _build(n: int, link: Callable[[int, int], Link]) -> Shape:
    return Shape(tuple(_socket(i, n) for i in range(n)),
                 {(i, j): link(i, j) for i in range(n) for j in range(i + 1, n)})


def nvswitch(n: int) -> Shape:
    return _build(n, lambda i, j: Link(_pcie(i, j, n), 18, 4, nvswitch=True))


def pcie(n: int) -> Shape:
    return _build(n, lambda i, j: Link(_pcie(i, j, n)))


def nvlink_pairs(n: int) -> Shape:
    return _build(n, lambda i, j: Link(_pcie(i, j, n), 12 if i // 2 == j // 2 else 0,
                                       3 if i // 2 == j // 2 else 0))


def mixed(n: int) -> Shape:
    half = max(n // 2, 2) if n >= 2 else n

    def link(i: int, j: int) -> Link:
        pcie_level = _pcie(i, j, n)
        if j < half:  # both in the NVLinked half
            return Link(pcie_level, 12 if i // 2 == j // 2 else 4, 3)
        return Link(pcie_level)

    return _build(n, link)


SHAPES: Mapping[str, Callable[[int], Shape]] = {
    "nvswitch": nvswitch, "pcie": pcie, "nvlink-pairs": nvlink_pairs, "mixed": mixed,
}


def links_of(shape: Shape, uuids: Sequence[str]) -> tuple[GpuLink, ...]:
    """The shape's links between the GPUs ``uuids`` (index order)."""
    return tuple(GpuLink(uuids[i], uuids[j], link) for (i, j), link in shape.links.items())
