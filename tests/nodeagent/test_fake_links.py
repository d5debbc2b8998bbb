"""The ``links`` of a fake-devices file, and the shipped example topologies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vgpu.errors import DiscoveryError
from vgpu.topology import shapes
from vgpu.topology.links import GpuLink, Link
from vgpu_nodeagent.devices.fake import FakeDiscovery, parse
from vgpu_nodeagent.devices.inventory import inventory

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "overlays" / "fake-gpus" / \
    "topologies"
#: Each shipped example and the named shape it draws (vgpu.topology.shapes).
SHIPPED = {"nvswitch-8.yaml": ("nvswitch", 8), "pcie-8.yaml": ("pcie", 8),
           "nvlink-pairs-4.yaml": ("nvlink-pairs", 4), "mixed-8.yaml": ("mixed", 8)}


def doc(links: Any, numa: tuple[int, ...] = (0, 0, 1)) -> str:
    devices = [{"uuid": f"GPU-{i}", "index": i, "model": "A100", "memory_mib": 40960,
                "numa": n} for i, n in enumerate(numa)]
    return json.dumps({"devices": devices, "links": links})


def pair(a: int, b: int, **link: Any) -> GpuLink:
    return GpuLink(f"GPU-{a}", f"GPU-{b}", Link(**link))


def test_entries_merge_per_pair_and_numa_fills_the_rest() -> None:
    read = parse(doc([{"gpus": "all", "pcie": "system"},
                      {"gpus": [0, 1], "pcie": "switch", "nvlinks": 4, "generation": 3},
                      {"gpus": [1, 0], "pcie": "socket", "nvlinks": 12}]), "f")
    assert read.links == (
        # The closest ancestor, the most links, the newest generation of the entries.
        pair(0, 1, pcie="switch", nvlinks=12, generation=3),
        pair(0, 2, pcie="system"), pair(1, 2, pcie="system"))
    # Pairs no entry gives a PCIe ancestor: the same NUMA node is one socket.
    read = parse(doc([{"gpus": [0, 1], "nvlinks": 2}], numa=(0, 0, 1)), "f")
    assert read.links == (pair(0, 1, pcie="socket", nvlinks=2), pair(0, 2, pcie="system"),
                          pair(1, 2, pcie="system"))
    read = parse(doc([], numa=(-1, 0, 0)), "f")
    assert read.links == (pair(0, 1), pair(0, 2), pair(1, 2, pcie="socket"))


@pytest.mark.parametrize(("links", "message"), [
    ({}, "f: links: expected a list"),
    (["x"], "f: links[0]: expected a mapping"),
    ([{"gpus": [0, 1], "speed": 9}], "links[0].speed: unknown key"),
    ([{"gpus": [0]}], "links[0].gpus: a link needs at least two GPUs"),
    ([{"gpus": [0, 7]}], "links[0].gpus: no device has index 7"),
    ([{"gpus": [0, 0]}], "links[0].gpus: an index appears twice"),
    ([{"gpus": "some"}], "links[0].gpus: expected a list of device indexes or 'all'"),
    ([{"gpus": [0, True]}], "links[0].gpus: expected a list of device indexes or 'all'"),
    ([{"gpus": [0, 1], "pcie": "qpi"}], "links[0].pcie: 'qpi' is not one of"),
    ([{"gpus": [0, 1], "nvlinks": -1}], "links[0].nvlinks: expected an integer between 0"),
    ([{"gpus": [0, 1], "nvlinks": 99}], "links[0].nvlinks: expected an integer between 0"),
    ([{"gpus": [0, 1], "generation": "4"}], "links[0].generation: expected an integer"),
    ([{"gpus": [0, 1], "nvswitch": "yes"}], "links[0].nvswitch: expected true or false"),
    ([{"gpus": [0, 1], "nvswitch": True}], "links[0].nvswitch: give the GPUs' links"),
])
def test_bad_links_say_what_and_where(links: Any, message: str) -> None:
    with pytest.raises(DiscoveryError) as caught:
        parse(doc(links), "f")
    assert message in str(caught.value)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_examples_draw_their_shapes(name: str) -> None:
    text = (EXAMPLES / name).read_text().replace("${NODE_NAME}", "n")
    read = parse(text, name)
    shape = shapes.SHAPES[SHIPPED[name][0]](SHIPPED[name][1])
    assert tuple(f.numa for f in read.facts) == shape.numa
    uuids = [f.uuid for f in read.facts]
    assert read.links is not None
    assert set(read.links) == set(shapes.links_of(shape, uuids))


def test_every_example_is_tested() -> None:
    assert {p.name for p in EXAMPLES.glob("*.yaml")} == set(SHIPPED)


def test_links_change_with_the_file_and_reach_the_inventory(tmp_path: Path) -> None:
    path = tmp_path / "gpus.json"
    path.write_text(doc([{"gpus": [0, 1], "nvlinks": 4}]))
    fake = FakeDiscovery(str(path))
    assert fake.links() is not None and len(fake.links() or ()) == 3
    path.write_text(doc([{"gpus": [0, 1], "nvlinks": 12}, {"gpus": [1, 2], "pcie": "board"}]))
    assert fake.refresh() is True  # same GPUs, other links: news for the inventory
    links = fake.links() or ()
    assert pair(0, 1, pcie="socket", nvlinks=12) in links
    # The inventory names only the GPUs it lists (a MIG GPU is left out, and its links).
    published = inventory(fake.devices()[:2], (), 10, links=links)
    assert published.links == (pair(0, 1, pcie="socket", nvlinks=12),)
    assert inventory(fake.devices(), (), 10).links is None
