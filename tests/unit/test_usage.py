"""Per-GPU usage derived from assignments."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.codecs import Assignment, GrantedDevice
from vgpu.devices import Usage
from vgpu.usage import tally


def grant(uuid: str, memory: int, cores: int) -> GrantedDevice:
    return GrantedDevice(uuid=uuid, memory_mib=memory, cores=cores)


CASES: list[tuple[str, list[Assignment], dict[str, Usage]]] = [
    ("nothing", [], {}),
    ("one-slice", [Assignment("n", {"c": (grant("G1", 3000, 30),)})],
     {"G1": Usage(3000, 30, 1)}),
    ("one-container-two-gpus", [Assignment("n", {"c": (grant("G1", 100, 10),
                                                        grant("G2", 200, 20))})],
     {"G1": Usage(100, 10, 1), "G2": Usage(200, 20, 1)}),
    ("two-pods-share-a-gpu", [Assignment("n", {"a": (grant("G1", 1000, 40),)}),
                              Assignment("n", {"b": (grant("G1", 2000, 60),)})],
     {"G1": Usage(3000, 100, 2)}),
    ("two-containers-of-one-pod-are-two-tasks",
     [Assignment("n", {"a": (grant("G1", 1, 0),), "b": (grant("G1", 2, 0),)})],
     {"G1": Usage(3, 0, 2)}),
    ("same-uuid-on-two-nodes-is-still-one-key",
     [Assignment("n1", {"a": (grant("G1", 1, 1),)}), Assignment("n2", {"a": (grant("G1", 1, 1),)})],
     {"G1": Usage(2, 2, 2)}),
    ("empty-assignment", [Assignment("n", {})], {}),
]


@pytest.mark.parametrize(("assignments", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_tally(assignments: list[Assignment], expected: dict[str, Usage]) -> None:
    assert tally(assignments) == expected


def test_tally_accepts_any_iterable() -> None:
    gen = (Assignment("n", {"c": (grant(f"G{i}", i, 0),)}) for i in range(3))
    assert tally(gen) == {f"G{i}": Usage(i, 0, 1) for i in range(3)}


_grants = st.lists(st.tuples(st.sampled_from(["G1", "G2", "G3"]), st.integers(0, 10**6),
                             st.integers(0, 100)), max_size=20)


@settings(max_examples=100, deadline=None)
@given(_grants)
def test_tally_conserves_totals(grants: list[tuple[str, int, int]]) -> None:
    assignments = [Assignment("n", {f"c{i}": (grant(u, m, c),)})
                   for i, (u, m, c) in enumerate(grants)]
    usages = tally(assignments)
    assert sum(u.memory_mib for u in usages.values()) == sum(m for _, m, _ in grants)
    assert sum(u.cores for u in usages.values()) == sum(c for _, _, c in grants)
    assert sum(u.tasks for u in usages.values()) == len(grants)
    assert set(usages) == {u for u, _, _ in grants}
