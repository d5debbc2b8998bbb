from __future__ import annotations

import pytest

from tests.support.pods import container, pod, slices
from vgpu.codecs import Assignment
from vgpu.pods import container_names as container_order
from vgpu_nodeagent.allocation.matching import (
    Candidate,
    MatchError,
    all_done,
    choose,
    match_devices,
    match_requests,
)

A = slices(("GPU-a", 1, 0))
AB = slices(("GPU-a", 1, 0), ("GPU-b", 1, 0))

ASSIGNMENT = Assignment(node="n", containers={"init": A, "one": A, "two": AB, "other": A})
ORDER = ("init", "one", "two", "other")


@pytest.mark.parametrize(("counts", "done", "expected"), [
    ([1], set(), ("init",)),                      # init containers first
    ([1], {"init"}, ("one",)),                    # each container once
    ([2], set(), ("two",)),                       # by count, skipping smaller ones
    ([1, 1], {"init"}, ("one", "other")),         # several requests in one call
    ([2, 1], {"init", "one"}, ("two", "other")),
    ([1], {"init", "one", "two"}, ("other",)),
])
def test_match(counts: list[int], done: set[str], expected: tuple[str, ...]) -> None:
    assert match_requests(counts, ASSIGNMENT, ORDER, done) == expected


@pytest.mark.parametrize(("counts", "done", "message"), [
    ([3], set(), "asks for 3 device(s) for a container, but no container still waiting for "
                 "its GPUs was assigned 3: init (1 GPU), one (1 GPU), two (2 GPUs), other (1 "
                 "GPU)"),
    ([2], {"two"}, "no container still waiting for its GPUs was assigned 2: init (1 GPU)"),
    ([1], {"init", "one", "two", "other"}, "every GPU container of the pod was already "
                                           "allocated: init (1 GPU)"),
    ([2, 2], set(), "was assigned 2: init (1 GPU), one (1 GPU), other (1 GPU)"),
])
def test_no_match_says_why(counts: list[int], done: set[str], message: str) -> None:
    with pytest.raises(MatchError) as info:
        match_requests(counts, ASSIGNMENT, ORDER, done)
    assert message in str(info.value)


def test_empty_assignment() -> None:
    with pytest.raises(MatchError, match="names no container"):
        match_requests([1], Assignment(node="n"), ORDER, set())


def test_container_order_puts_init_containers_first_and_unknown_names_last() -> None:
    p = pod("p", [container("b", 1), container("a", 1)], init_containers=[container("i", 1)])
    assert container_order(p) == ("i", "b", "a")
    assignment = Assignment(node="n", containers={"zz": A, "a": A, "b": A, "i": A})
    assert match_requests([1, 1, 1, 1], assignment, container_order(p), set()) == \
        ("i", "b", "a", "zz")


def test_all_done() -> None:
    assert not all_done(ASSIGNMENT, {"init", "one"})
    assert all_done(ASSIGNMENT, set(ORDER))


B = slices(("GPU-b", 1, 0))
BY_GPU = Assignment(node="n", containers={"init": A, "one": B, "two": AB, "other": A})


@pytest.mark.parametrize(("gpus", "done", "expected"), [
    ([{"GPU-a"}], set(), ("init",)),              # first in order among equal GPU sets
    ([{"GPU-b"}], set(), ("one",)),               # by GPUs, not by order
    ([{"GPU-a"}], {"init"}, ("other",)),
    ([{"GPU-b", "GPU-a"}], set(), ("two",)),
    ([{"GPU-a"}, {"GPU-b"}], set(), ("init", "one")),
    ([{"GPU-a"}, {"GPU-a"}], set(), ("init", "other")),
    ([{"GPU-c"}], set(), None),                   # no container on that GPU
    ([{"GPU-b"}], {"one"}, None),                 # already allocated
    ([{"GPU-a", "GPU-c"}], set(), None),          # overlapping is not the same
    ([{"GPU-a"}, {"GPU-c"}], set(), None),        # every request must match
])
def test_match_devices(gpus: list[set[str]], done: set[str],
                       expected: tuple[str, ...] | None) -> None:
    sets = [frozenset(g) for g in gpus]
    assert match_devices(sets, BY_GPU, ORDER, done) == expected


def candidate(uuid: str, done: frozenset[str] = frozenset()) -> Candidate:
    return Candidate(Assignment("n", {"c": slices((uuid, 1, 0))}), ("c",), done)


@pytest.mark.parametrize(("gpu", "candidates", "expected"), [
    ("GPU-b", [candidate("GPU-a"), candidate("GPU-b")], (1, ("c",))),
    ("GPU-a", [candidate("GPU-a"), candidate("GPU-a")], (0, ("c",))),  # oldest first
    ("GPU-a", [candidate("GPU-a", frozenset({"c"})), candidate("GPU-a")], (1, ("c",))),
    ("GPU-c", [candidate("GPU-a"), candidate("GPU-b")], None),
    ("GPU-a", [], None),
])
def test_choose_the_pod(gpu: str, candidates: list[Candidate],
                        expected: tuple[int, tuple[str, ...]] | None) -> None:
    assert choose([frozenset({gpu})], candidates) == expected
