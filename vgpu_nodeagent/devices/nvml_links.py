"""The links between a node's GPUs, read from NVML.

Per GPU and NVLink index (up to ``NVML_NVLINK_MAX_LINKS``): ``nvmlDeviceGetNvLinkState``
says whether the link is up, ``nvmlDeviceGetNvLinkRemotePciInfo`` (the C API's ``_v2``)
whose PCI device is at the other end, and ``nvmlDeviceGetNvLinkVersion`` its generation
(or, where ``nvmlDeviceGetArchitecture`` names an NVLink architecture, the generation of
that architecture: H100s have been seen to answer version 5.0 for their NVLink 4).
A link whose far end is another GPU of the node joins that pair directly. On NVSwitch
systems (HGX/DGX A100, H100, B200) the far end is a switch, never the peer GPU, so a link
whose far end is no GPU of ours counts as a switch link when
``nvmlDeviceGetNvLinkRemoteDeviceType`` says NVSwitch, or when the driver cannot tell (as
NCCL assumes, for VMs that do not show the switches); two GPUs both wired to the fabric
then talk at the fewer of their switch links, as ``nvidia-smi topo -m`` shows. Every pair
also gets its PCIe common ancestor from ``nvmlDeviceGetTopologyCommonAncestor``.

Each call is guarded on its own: a link or pair NVML cannot describe is left unknown
rather than failing discovery. None of this has run on a real GPU yet
(docs/node-agent.md#gpu-links); the tests run it against a stand-in of ``pynvml``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vgpu import logs
from vgpu.topology import links as tl
from vgpu.topology.links import GpuLink, Link

_log = logs.get("vgpu.nodeagent.nvml")

#: ``nvmlNvlinkVersion_t`` (nvidia-ml-py's ``NVML_NVLINK_VERSION_*``) -> NVLink generation.
_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
#: ``nvmlDeviceArchitecture_t`` -> the NVLink generation of its data-center parts (Pascal,
#: Volta, Turing, Ampere, Hopper, Blackwell); Ada has no NVLink.
_ARCH_GENERATION = {4: 1, 5: 2, 6: 2, 7: 3, 9: 4, 10: 5}
#: ``nvmlGpuTopologyLevel_t`` -> the PCIe ancestor.
_ANCESTOR = {0: tl.BOARD, 10: tl.SWITCH, 20: tl.SWITCHES, 30: tl.HOSTBRIDGE, 40: tl.SOCKET,
             50: tl.SYSTEM}
_MAX_LINKS = 36
_DEVICE_TYPE_GPU = 0
_DEVICE_TYPE_SWITCH = 2


def pci_key(bus_id: Any) -> str:
    """NVML's PCI bus id (``00000000:3B:00.0``, text or bytes) as sysfs names the device,
    ``0000:3b:00.0``: one spelling to compare and to look up."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    domain, _, rest = text.strip().partition(":")
    return f"{domain[-4:].zfill(4)}:{rest}".lower()


class _Reader:
    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", _MAX_LINKS))
        self.enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)

    def call(self, name: str, *args: Any) -> Any:
        """``nvml.name(*args)``, or None when NVML cannot answer (no such function in this
        nvidia-ml-py, or any NVML error)."""
        fn = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError:
            return None

    def nvlinks(self, handle: Any, gpus: Mapping[str, str]
                ) -> tuple[dict[str, int], int, int]:
        """Links to each peer GPU (by UUID), links to the NVSwitch fabric, the generation."""
        direct: dict[str, int] = {}
        switch = generation = 0
        arch = self.call("nvmlDeviceGetArchitecture", handle)
        by_arch = _ARCH_GENERATION.get(int(arch), 0) if arch is not None else 0
        for link in range(self.max_links):
            if self.call("nvmlDeviceGetNvLinkState", handle, link) != self.enabled:
                continue
            remote = self.call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            if remote is None:
                continue
            if by_arch:
                generation = by_arch
            else:
                version = self.call("nvmlDeviceGetNvLinkVersion", handle, link)
                generation = max(generation, _GENERATION.get(int(version or 0), 0))
            peer = gpus.get(pci_key(remote.busId))
            if peer is not None:
                direct[peer] = direct.get(peer, 0) + 1
                continue
            kind = self.call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            if kind is None or int(kind) == _DEVICE_TYPE_SWITCH:
                switch += 1
            # Another kind: a GPU the agent does not share (MIG), an IBM NPU: no peer.
        return direct, switch, generation

    def ancestor(self, a: Any, b: Any) -> str:
        level = self.call("nvmlDeviceGetTopologyCommonAncestor", a, b)
        return tl.UNKNOWN if level is None else _ANCESTOR.get(int(level), tl.UNKNOWN)


def read_links(nvml: Any, handles: Sequence[tuple[str, Any]]) -> tuple[GpuLink, ...]:
    """The link of every pair of the GPUs ``handles`` ((UUID, NVML handle), index order)."""
    reader = _Reader(nvml)
    gpus: dict[str, str] = {}
    for uuid, handle in handles:
        info = reader.call("nvmlDeviceGetPciInfo", handle)
        if info is not None:
            gpus[pci_key(info.busId)] = uuid
    seen = {uuid: reader.nvlinks(handle, gpus) for uuid, handle in handles}
    out: list[GpuLink] = []
    for i, (a, ha) in enumerate(handles):
        direct_a, switch_a, gen_a = seen[a]
        for b, hb in handles[i + 1:]:
            direct_b, switch_b, gen_b = seen[b]
            pcie = reader.ancestor(ha, hb)
            direct = max(direct_a.get(b, 0), direct_b.get(a, 0))
            generation = min(gen_a, gen_b) or max(gen_a, gen_b)
            if direct:
                link = Link(pcie, direct, generation)
            elif switch_a and switch_b:
                link = Link(pcie, min(switch_a, switch_b), generation, nvswitch=True)
            else:
                link = Link(pcie)
            out.append(GpuLink(a, b, link))
    if len(handles) < 2:
        _log.info("one GPU: it has no peer to link to", gpus=len(handles))
    else:
        _log.info("GPU links discovered", gpus=len(handles),
                  nvlink_pairs=sum(1 for g in out if g.link.nvlinks),
                  nvswitch=any(g.link.nvswitch for g in out))
    return tuple(out)
