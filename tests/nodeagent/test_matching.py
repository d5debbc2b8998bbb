from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from tests.support.pods import container, pod, slices
from vgpu.codecs import Assignment
from vgpu.pods import container_names as container_order
from vgpu_nodeagent.allocation.inflight_pod import (
    InFlightPod,
    MatchError,
    first_by_gpus,
    start_order,
)


def waiting(assignment: Assignment, order: Sequence[str],
            done: Collection[str] = ()) -> InFlightPod:
    """A pod in allocation with ``assignment``, its spec's containers in ``order``."""
    return InFlightPod({}, "default/p", "uid-p", assignment, "",
                       start_order(assignment, order), frozenset(done))


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
    assert waiting(ASSIGNMENT, ORDER, done).by_counts(counts) == expected


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
        waiting(ASSIGNMENT, ORDER, done).by_counts(counts)
    assert message in str(info.value)


def test_empty_assignment() -> None:
    with pytest.raises(MatchError, match="names no container"):
        waiting(Assignment(node="n"), ORDER).by_counts([1])


def test_container_order_puts_init_containers_first_and_unknown_names_last() -> None:
    p = pod("p", [container("b", 1), container("a", 1)], init_containers=[container("i", 1)])
    assert container_order(p) == ("i", "b", "a")
    assignment = Assignment(node="n", containers={"zz": A, "a": A, "b": A, "i": A})
    assert waiting(assignment, container_order(p)).by_counts([1, 1, 1, 1]) == \
        ("i", "b", "a", "zz")


def test_all_done() -> None:
    assert not waiting(ASSIGNMENT, ORDER, {"init", "one"}).complete
    assert waiting(ASSIGNMENT, ORDER, set(ORDER)).complete


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
    assert waiting(BY_GPU, ORDER, done).by_gpus(sets) == expected


def candidate(uuid: str, done: frozenset[str] = frozenset()) -> InFlightPod:
    return waiting(Assignment("n", {"c": slices((uuid, 1, 0))}), ("c",), done)


def choose(gpu_sets: list[frozenset[str]],
           candidates: list[InFlightPod]) -> tuple[int, tuple[str, ...]] | None:
    claim = first_by_gpus(candidates, gpu_sets)
    if claim is None:
        return None
    return next(i for i, c in enumerate(candidates) if c is claim.pod), claim.containers


@pytest.mark.parametrize(("gpu", "candidates", "expected"), [
    ("GPU-b", [candidate("GPU-a"), candidate("GPU-b")], (1, ("c",))),
    ("GPU-a", [candidate("GPU-a"), candidate("GPU-a")], (0, ("c",))),  # oldest first
    ("GPU-a", [candidate("GPU-a", frozenset({"c"})), candidate("GPU-a")], (1, ("c",))),
    ("GPU-c", [candidate("GPU-a"), candidate("GPU-b")], None),
    ("GPU-a", [], None),
])
def test_choose_the_pod(gpu: str, candidates: list[InFlightPod],
                        expected: tuple[int, tuple[str, ...]] | None) -> None:
    assert choose([frozenset({gpu})], candidates) == expected
