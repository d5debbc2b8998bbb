"""``nodeagent.excludeDevices`` (HAMi's device-plugin filterdevices): the GPUs named by UUID
or index are neither advertised nor listed in the inventory, nor in its links."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu_nodeagent.devices.excluded import filtered
from vgpu_nodeagent.devices.fake import FakeDiscovery

FILE = """
devices:
- {uuid: GPU-0, index: 0, model: NVIDIA A100-SXM4-40GB, memory_mib: 40960}
- {uuid: GPU-1, index: 1, model: NVIDIA A100-SXM4-40GB, memory_mib: 40960}
- {uuid: GPU-2, index: 2, model: NVIDIA A100-SXM4-40GB, memory_mib: 40960}
links:
- {gpus: all, pcie: system}
"""


@pytest.mark.parametrize(("entries", "left"), [
    ((), ("GPU-0", "GPU-1", "GPU-2")),
    (("GPU-1",), ("GPU-0", "GPU-2")),
    (("0", " 2 "), ("GPU-1",)),
    (("GPU-9", "7"), ("GPU-0", "GPU-1", "GPU-2")),
])
def test_excluded_gpus_are_left_out(tmp_path: Path, entries: tuple[str, ...],
                                    left: tuple[str, ...]) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(FILE)
    discovery = filtered(FakeDiscovery(str(path)), entries)
    assert tuple(d.uuid for d in discovery.devices()) == left
    links = discovery.links() or ()
    assert {u for link in links for u in (link.a, link.b)} <= set(left)
    assert len(links) == len(left) * (len(left) - 1) // 2
