"""The link model (ranks, labels, the matrix), the inventory's links on the wire, and the
named shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.annotations import NODE_GPUS
from vgpu.codecs import NodeInventory, decode_inventory, encode_inventory
from vgpu.devices import Device
from vgpu.errors import CodecError
from vgpu.topology import shapes
from vgpu.topology.links import (
    BOARD,
    HOSTBRIDGE,
    PCIE_LEVELS,
    SOCKET,
    SWITCH,
    SWITCHES,
    SYSTEM,
    UNKNOWN,
    GpuLink,
    Link,
    label,
    matrix,
    nvlink_gbps,
    rank,
)

FASTEST_FIRST = [
    Link(SYSTEM, 18, 5, nvswitch=True),  # 900 GB/s
    Link(SYSTEM, 18, 4, nvswitch=True),  # 450
    Link(SOCKET, 12, 3),                 # 300
    Link(SYSTEM, 4, 0),                  # unknown generation: 25 GB/s a link
    Link(SYSTEM, 1, 1),
    Link(BOARD), Link(SWITCH), Link(SWITCHES), Link(HOSTBRIDGE), Link(SOCKET), Link(SYSTEM),
    Link(UNKNOWN),
]


def test_ranks_order_links_by_speed() -> None:
    ranks = [rank(link) for link in FASTEST_FIRST]
    assert ranks == sorted(ranks, reverse=True)
    assert len(set(ranks)) == len(ranks)
    assert rank(Link()) == 0
    # Over NVLink the PCIe path does not count: equal bandwidth, equal rank.
    assert rank(Link(SOCKET, 12, 3)) == rank(Link(SYSTEM, 12, 3, nvswitch=True))


@pytest.mark.parametrize(("link", "text", "gbps"), [
    (Link(SYSTEM, 18, 4, nvswitch=True), "NVS18", 450),
    (Link(SWITCH, 12, 3), "NV12", 300),
    (Link(SYSTEM, 2, 9), "NV2", 100),  # a newer generation than the table: as the newest
    (Link(SWITCH), "PIX", 0), (Link(SWITCHES), "PXB", 0), (Link(HOSTBRIDGE), "PHB", 0),
    (Link(SOCKET), "NODE", 0), (Link(SYSTEM), "SYS", 0), (Link(BOARD), "BRD", 0),
    (Link(), "?", 0),
])
def test_labels_are_nvidia_smi_s(link: Link, text: str, gbps: int) -> None:
    assert label(link) == text
    assert nvlink_gbps(link) == gbps


def test_matrix() -> None:
    links = [GpuLink("b", "a", Link(SWITCH, 12, 3)), GpuLink("a", "c", Link(SYSTEM)),
             GpuLink("a", "zz", Link(SWITCH))]  # a GPU the node does not list: left out
    m = matrix(["a", "b", "c"], links)
    assert m.ranks[0][1] == m.ranks[1][0] == rank(Link(SWITCH, 12, 3))
    assert m.ranks[1][2] == 0  # no link given: unknown
    assert not m.uniform
    assert m.worst([0, 1]) == rank(Link(SWITCH, 12, 3))
    assert m.worst([0, 1, 2]) == 0
    assert m.worst([2]) > m.worst([0, 1])  # one GPU has no pair to slow it
    assert m.slowest([0, 1]) == Link(SWITCH, 12, 3)
    assert m.slowest([0]) is None
    assert matrix(["a", "b"], links).uniform
    assert matrix(["a"], []).uniform


# --- on the wire ---------------------------------------------------------------------------

def devices(n: int) -> tuple[Device, ...]:
    return tuple(Device(f"GPU-{i}", i, "A100", 40960) for i in range(n))


_links = st.builds(Link, pcie=st.sampled_from(PCIE_LEVELS), nvlinks=st.integers(0, 36),
                   generation=st.integers(0, 8), nvswitch=st.booleans())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, max(n - 1, 0)),
                                   st.integers(0, max(n - 1, 0)), _links), max_size=12))))
def test_links_round_trip(case: tuple[int, list[tuple[int, int, Link]]]) -> None:
    n, raw = case
    pairs: dict[frozenset[int], GpuLink] = {}
    for a, b, link in raw:
        if a != b:
            pairs.setdefault(frozenset((a, b)), GpuLink(f"GPU-{a}", f"GPU-{b}", link))
    inventory = NodeInventory(devices(n), links=tuple(
        sorted(pairs.values(), key=lambda g: tuple(sorted((g.a, g.b))))))
    text = encode_inventory(inventory)
    assert decode_inventory(text) == inventory
    assert encode_inventory(decode_inventory(text)) == text


def test_unknown_topology_is_no_links_key() -> None:
    text = encode_inventory(NodeInventory(devices(2)))
    assert "links" not in json.loads(text)
    assert decode_inventory(text).links is None
    # A version 2 inventory (an agent from before topology) reads as unknown topology,
    # whatever it carries.
    old = json.loads(text)
    old["version"] = 2
    old["links"] = [{"gpus": ["GPU-0", "GPU-1"], "pcie": "switch"}]
    assert decode_inventory(json.dumps(old)).links is None
    # One GPU, known: no pairs.
    assert decode_inventory(encode_inventory(NodeInventory(devices(1), links=()))).links == ()


def _inventory(links: Any) -> str:
    wire = json.loads(encode_inventory(NodeInventory(devices(3))))
    wire["links"] = links
    return json.dumps(wire)


def _pair(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"gpus": ["GPU-0", "GPU-1"], "pcie": "switch", "nvlinks": 4,
                             "generation": 3, "nvswitch": False}
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not ...}


@pytest.mark.parametrize(("links", "fragment"), [
    ({}, ".links: expected a list"),
    (["x"], ".links[0]: expected an object"),
    ([_pair(gpus=["GPU-0"])], ".links[0].gpus: expected two GPU UUIDs"),
    ([_pair(gpus="GPU-0,GPU-1")], ".links[0].gpus: expected two GPU UUIDs"),
    ([_pair(gpus=["GPU-0", "GPU-0"])], ".links[0].gpus: a GPU cannot link to itself"),
    ([_pair(gpus=["GPU-0", "GPU-9"])], "GPU-9 is not a GPU of the inventory"),
    ([_pair(pcie=...)], ".links[0].pcie: expected a non-empty string"),
    ([_pair(pcie="qpi")], ".links[0].pcie: 'qpi' is not one of"),
    ([_pair(nvlinks=-1)], ".links[0].nvlinks: -1 is below 0"),
    ([_pair(nvlinks="12")], ".links[0].nvlinks: expected an integer"),
    ([_pair(generation=True)], ".links[0].generation: expected an integer"),
    ([_pair(nvswitch="yes")], ".links[0].nvswitch: expected true or false"),
    ([_pair(), _pair(gpus=["GPU-1", "GPU-0"])], ".links[1].gpus: the pair GPU-1, GPU-0 "
                                                 "appears twice"),
])
def test_malformed_links(links: Any, fragment: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_inventory(_inventory(links))
    assert str(caught.value).startswith(NODE_GPUS)
    assert fragment in str(caught.value)


def test_optional_link_fields_default() -> None:
    inventory = decode_inventory(_inventory([{"gpus": ["GPU-0", "GPU-2"], "pcie": "socket"}]))
    assert inventory.links == (GpuLink("GPU-0", "GPU-2", Link(SOCKET)),)


# --- shapes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(shapes.SHAPES))
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_every_pair_of_a_shape_has_a_link(name: str, n: int) -> None:
    shape = shapes.SHAPES[name](n)
    assert len(shape.numa) == n
    assert set(shape.links) == {(i, j) for i in range(n) for j in range(i + 1, n)}
    m = matrix([str(i) for i in range(n)], shapes.links_of(shape, [str(i) for i in range(n)]))
    assert m.uniform == (name == "nvswitch" or n <= 2)


def test_the_shapes_say_what_their_names_say() -> None:
    assert {label(v) for v in shapes.nvswitch(8).links.values()} == {"NVS18"}
    pcie = shapes.pcie(8)
    assert (label(pcie.links[0, 1]), label(pcie.links[0, 2]), label(pcie.links[0, 4])) == (
        "PIX", "NODE", "SYS")
    assert pcie.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    pairs = shapes.nvlink_pairs(4)
    assert [label(pairs.links[p]) for p in ((0, 1), (2, 3), (1, 2))] == ["NV12", "NV12", "SYS"]
    mixed = shapes.mixed(8)
    assert [label(mixed.links[p]) for p in ((0, 1), (1, 2), (4, 5), (4, 6), (3, 4))] == [
        "NV12", "NV4", "PIX", "NODE", "SYS"]
