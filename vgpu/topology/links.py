"""The link between two GPUs of a node, and a rank that orders links by speed.

A pair of GPUs talks over NVLink (bonded links straight between them, or through the
NVSwitch fabric both are wired to) or over PCIe, through their closest common ancestor:
the same board, one PCIe switch, several switches, a host bridge, one CPU socket (NUMA
node), or the interconnect between sockets. NVML reports the ancestor as
``nvmlDeviceGetTopologyCommonAncestor``'s level and the NVLinks per link index; nvidia-smi
``topo -m`` prints the same facts as ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS`` and
``NV#``, the labels :func:`label` uses.

:func:`rank` turns a link into one integer, larger meaning faster: NVLink bandwidth
(links × the generation's per-link bandwidth, so any NVLink beats PCIe), else the PCIe
ancestor; two GPUs on NVLink talk over it whatever their PCIe path, so that path does not
count for them (every pair of an NVSwitch node ranks the same). Placement compares sets of
GPUs by the rank of their slowest pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: PCIe common ancestors, slowest first (the index is part of the rank).
UNKNOWN = "unknown"
SYSTEM = "system"          # across CPU sockets (QPI/UPI/Infinity Fabric): SYS
SOCKET = "socket"          # the host bridges of one CPU socket / NUMA node: NODE
HOSTBRIDGE = "hostbridge"  # one PCIe host bridge: PHB
SWITCHES = "switches"      # several PCIe switches, no host bridge: PXB
SWITCH = "switch"          # one PCIe switch: PIX
BOARD = "board"            # two GPUs on one board: BRD
PCIE_LEVELS: tuple[str, ...] = (UNKNOWN, SYSTEM, SOCKET, HOSTBRIDGE, SWITCHES, SWITCH, BOARD)
_PCIE_LABELS = {UNKNOWN: "?", SYSTEM: "SYS", SOCKET: "NODE", HOSTBRIDGE: "PHB",
                SWITCHES: "PXB", SWITCH: "PIX", BOARD: "BRD"}
_PCIE_INDEX = {level: i for i, level in enumerate(PCIE_LEVELS)}

#: One NVLink's bandwidth in one direction, GB/s, by generation (NVIDIA's figures: 1.0 on
#: P100, 2.x on V100, 3.x on A100, 4.0 on H100, 5.0 on B200). Unknown generations count as
#: 25, newer ones as the newest here.
NVLINK_GBPS: Mapping[int, int] = {1: 20, 2: 25, 3: 25, 4: 25, 5: 50}
_UNKNOWN_GBPS = 25


@dataclass(frozen=True, slots=True)
class Link:
    """What connects two GPUs.

    ``nvlinks`` counts the NVLinks between them: links wired straight to the other GPU, or,
    through an NVSwitch (``nvswitch``), the fewer of the two GPUs' links to the switches
    (what nvidia-smi shows). ``generation`` is the NVLink generation (0: unknown). ``pcie``
    is their closest common PCIe ancestor, one of :data:`PCIE_LEVELS`.
    """

    pcie: str = UNKNOWN
    nvlinks: int = 0
    generation: int = 0
    nvswitch: bool = False


NO_LINK = Link()
#: :meth:`LinkMatrix.worst` of a set without pairs (one GPU): above every rank.
NO_PAIR = 1 << 62


@dataclass(frozen=True, slots=True)
class GpuLink:
    """The link between the GPUs with UUIDs ``a`` and ``b``."""

    a: str
    b: str
    link: Link


def nvlink_gbps(link: Link) -> int:
    """The pair's NVLink bandwidth, one direction, GB/s (0: no NVLink)."""
    if link.nvlinks <= 0:
        return 0
    per_link = NVLINK_GBPS.get(link.generation) or (
        NVLINK_GBPS[max(NVLINK_GBPS)] if link.generation > max(NVLINK_GBPS) else _UNKNOWN_GBPS)
    return link.nvlinks * per_link


def rank(link: Link) -> int:
    """Larger is faster: NVLink bandwidth, else the PCIe ancestor; 0 for an unknown link."""
    gbps = nvlink_gbps(link)
    if gbps:
        return gbps * len(PCIE_LEVELS)
    return _PCIE_INDEX.get(link.pcie, 0)


def label(link: Link) -> str:
    """nvidia-smi's spelling: ``NV12`` (straight NVLinks), ``NVS18`` (through NVSwitch),
    else the PCIe ancestor (``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``; ``BRD`` for one
    board, ``?`` unknown)."""
    if link.nvlinks > 0:
        return f"{'NVS' if link.nvswitch else 'NV'}{link.nvlinks}"
    return _PCIE_LABELS.get(link.pcie, "?")


@dataclass(frozen=True, slots=True)
class LinkMatrix:
    """The rank of every pair of a node's GPUs, by their position in the inventory; a pair
    no link names ranks 0 (unknown). ``uniform``: every pair ranks the same, so the
    topology cannot tell one set of GPUs from another."""

    ranks: tuple[tuple[int, ...], ...]
    links: tuple[tuple[Link, ...], ...]
    uniform: bool

    def __len__(self) -> int:
        return len(self.ranks)

    def worst(self, positions: Sequence[int]) -> int:
        """The rank of the slowest pair among ``positions`` (one GPU: no pair, the
        largest int so that it never limits)."""
        ranks = self.ranks
        out = NO_PAIR
        for i, a in enumerate(positions):
            row = ranks[a]
            for b in positions[i + 1:]:
                out = min(out, row[b])
        return out

    def slowest(self, positions: Sequence[int]) -> Link | None:
        """The slowest pair's link among ``positions``; None for fewer than two GPUs."""
        pairs = [self.links[a][b] for i, a in enumerate(positions) for b in positions[i + 1:]]
        return min(pairs, key=rank) if pairs else None


def matrix(uuids: Sequence[str], links: Iterable[GpuLink]) -> LinkMatrix:
    """The matrix of ``links`` over the GPUs ``uuids`` (in that order); links naming other
    GPUs are left out."""
    at = {u: i for i, u in enumerate(uuids)}
    n = len(uuids)
    table = [[NO_LINK] * n for _ in range(n)]
    for item in links:
        i, j = at.get(item.a), at.get(item.b)
        if i is None or j is None or i == j:
            continue
        table[i][j] = table[j][i] = item.link
    ranks = tuple(tuple(rank(link) for link in row) for row in table)
    off = {ranks[i][j] for i in range(n) for j in range(n) if i != j}
    return LinkMatrix(ranks, tuple(tuple(row) for row in table), len(off) <= 1)
