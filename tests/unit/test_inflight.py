"""The ambiguity rule: which two in-flight pods a node agent could confuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.codecs import Assignment, GrantedDevice
from vgpu.confusable import (
    any_confusable,
    confusable,
    gpus_at_stake,
    one_gpu_confusable,
    one_gpu_grants,
)


def slices(*spec: tuple[str, int, int]) -> tuple[GrantedDevice, ...]:
    return tuple(GrantedDevice(uuid, mem, cores) for uuid, mem, cores in spec)


def one(*spec: tuple[str, int, int], node: str = "n1", priority: int | None = None,
        name: str = "main") -> Assignment:
    return Assignment(node, {name: slices(*spec)},
                      priorities={} if priority is None else {name: priority})


A4, A8, B4 = ("GPU-A", 4096, 0), ("GPU-A", 8192, 0), ("GPU-B", 4096, 0)
A4C = ("GPU-A", 4096, 50)
CASES = [
    ("different GPUs, same limits", one(A4), one(B4), False),
    ("different GPUs, different limits", one(A8), one(B4), False),
    ("same GPU, identical grants", one(A4), one(A4), False),
    ("same GPU, other memory", one(A4), one(A8), True),
    ("same GPU, other cores", one(A4), one(A4C), True),
    ("same GPU, other priority", one(A4, priority=1), one(A4), True),
    ("same GPU, other container name, identical grant", one(A4, name="x"), one(A4), False),
    ("one GPU vs two: the count differs", one(A4), one(A4, B4), False),
    ("two GPUs, overlapping, other limits", one(A4, B4), one(A8, ("GPU-C", 4096, 0)), True),
    ("two GPUs, same pair, identical", one(A4, B4), one(B4, A4), False),
    ("unknown assignment", None, one(A4), True),
    ("another node's assignment", one(A4, node="n2"), one(B4), True),
    ("a pod whose assignment is empty", Assignment("n1", {}), one(A4), False),
]


@pytest.mark.parametrize(("a", "b", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_confusable(a: Assignment | None, b: Assignment | None, expected: bool) -> None:
    assert confusable(a, b) is expected
    assert confusable(b, a) is expected


def test_a_second_container_can_make_pods_confusable() -> None:
    a = Assignment("n1", {"x": slices(B4), "y": slices(A4)})
    assert confusable(a, one(A8)) and not confusable(a, one(("GPU-C", 1, 0)))
    assert any_confusable(a, {"p": one(("GPU-C", 1, 0)), "q": one(A8)})
    assert not any_confusable(a, {})


grant = st.builds(GrantedDevice, st.sampled_from(["GPU-A", "GPU-B", "GPU-C"]),
                  st.integers(1, 3), st.integers(0, 2))
assignment = st.builds(lambda c: Assignment("n1", c),
                       st.dictionaries(st.sampled_from(["a", "b"]),
                                       st.lists(grant, min_size=1, max_size=2).map(tuple),
                                       max_size=2))


@given(assignment, assignment)
def test_confusable_is_symmetric_and_a_pod_with_itself_is_not(a: Assignment,
                                                               b: Assignment) -> None:
    assert confusable(a, b) == confusable(b, a)
    # Two replicas of a one-container pod are interchangeable; with two containers on
    # shared GPUs, one replica's first could be the other's second.
    if len(a.containers) == 1:
        assert not confusable(a, Assignment("n1", dict(a.containers)))


@given(assignment, st.lists(st.one_of(st.none(), assignment), max_size=3))
def test_a_grant_is_confusable_only_on_the_gpus_at_stake(
        a: Assignment, inflight: list[Assignment | None]) -> None:
    at_stake = gpus_at_stake("n1", inflight)
    if at_stake is not None and any(confusable(a, other) for other in inflight):
        assert at_stake & {s.uuid for slices in a.containers.values() for s in slices}


@pytest.mark.parametrize(("inflight", "expected"), [
    ([], frozenset()),
    ([one(A4), one(B4, A8)], frozenset({"GPU-A", "GPU-B"})),
    ([one(A4), None], None),
    ([one(A4, node="n2")], None),
    ([one(("?1", 1, 0))], None),
], ids=["nothing in flight", "the GPUs held", "an unknown assignment", "another node's",
        "a placeholder ID"])
def test_gpus_at_stake(inflight: list[Assignment | None],
                       expected: frozenset[str] | None) -> None:
    assert gpus_at_stake("n1", inflight) == expected


@given(grant, st.one_of(st.none(), st.integers(0, 1)),
       st.lists(st.one_of(st.none(), assignment, assignment.map(
           lambda a: Assignment("n2", dict(a.containers)))), max_size=4))
def test_the_one_gpu_rule_is_the_general_one(
        g: GrantedDevice, priority: int | None, inflight: list[Assignment | None]) -> None:
    pod = Assignment("n1", {"main": (g,)},
                     priorities={} if priority is None else {"main": priority})
    held = one_gpu_grants("n1", inflight)
    general = any(confusable(pod, other) for other in inflight)
    if held is None:
        assert general
    else:
        assert one_gpu_confusable(g.uuid, g.memory_mib, g.cores, priority, held) == general
