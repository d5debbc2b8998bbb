"""The PreFilter order the filters visit nodes in: the partial sort equals a full one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu_scheduler.framework import visit_order
from vgpu_scheduler.framework.visit_order import HEAD, best_first

# Few distinct values, so that ties straddle the head's boundary; NaN as a policy may
# leave it where a node has no GPUs.
VALUES = st.sampled_from([0.0, 0.25, 0.5, 1.0, -3.0, float("nan")])
SMALL = st.lists(VALUES, max_size=2 * HEAD)
# Past twice the head: the partial sort's path.
LARGE = st.lists(VALUES, min_size=2 * HEAD + 1, max_size=3 * HEAD)


@settings(max_examples=60)
@given(st.one_of(SMALL, LARGE), st.booleans())
def test_best_first_is_the_stable_sort_of_minus_keys(keys: list[float], gaps: bool) -> None:
    values = np.array(keys, dtype=np.float64)
    candidates = np.arange(len(values), dtype=np.int64) * (3 if gaps else 1)
    expected = candidates[np.argsort(-values, kind="stable")].tolist()
    assert list(best_first(candidates, values)) == expected


def test_alike_nodes_keep_their_positions() -> None:
    candidates = np.arange(5000, dtype=np.int64)
    assert list(best_first(candidates, np.zeros(5000))) == candidates.tolist()


def test_a_large_set_with_distinct_keys() -> None:
    rng = np.random.default_rng(7)
    values = rng.random(5000)
    candidates = np.flatnonzero(rng.random(5000) > 0.1)
    got = list(best_first(candidates, values[candidates]))
    assert got == candidates[np.argsort(-values[candidates], kind="stable")].tolist()
    assert values[got[0]] == values[candidates].max()


@pytest.mark.parametrize(("mask", "order", "last", "start", "expected"), [
    ([1, 1, 1, 1], None, set(), 0, [0, 1, 2, 3]),
    ([1, 1, 1, 1], None, set(), 1, [1, 2, 3, 0]),
    ([1, 1, 1, 1], None, {1}, 1, [2, 3, 0, 1]),
    ([1, 0, 1, 1], [1.0, 9.0, 2.0, 3.0], set(), 5, [3, 2, 0]),
    ([1, 1, 1, 1], [1.0, 9.0, 2.0, 3.0], {1, 3}, 0, [2, 0, 1, 3]),
    ([1, 1, 1, 1], [5.0, 5.0, 5.0, 5.0], {0}, 0, [1, 2, 3, 0]),
    ([0, 1, 0, 0], [1.0, 2.0, 3.0, 4.0], {1}, 0, [1]),
])
def test_candidates_best_first_with_the_visit_last_nodes_after(
        mask: list[int], order: list[float] | None, last: set[int], start: int,
        expected: list[int]) -> None:
    keys = None if order is None else np.array(order, dtype=np.float64)
    got = visit_order.candidates(np.array(mask, dtype=bool), keys,
                                 last.__contains__ if last else None, start)
    assert list(got) == expected


@pytest.mark.parametrize("order", [None, np.arange(1000, dtype=np.float64)])
def test_visit_last_is_asked_only_of_the_nodes_reached(order: np.ndarray | None) -> None:
    asked: list[int] = []

    def last(pos: int) -> bool:
        asked.append(pos)
        return pos % 2 == 0

    got = iter(visit_order.candidates(np.ones(1000, dtype=bool), order, last, 0))
    first = [next(got) for _ in range(3)]
    assert all(pos % 2 for pos in first)
    assert len(asked) <= 6
    rest = list(got)
    assert len(asked) == 1000
    assert sorted(first + rest) == list(range(1000))
    assert all(pos % 2 == 0 for pos in rest[-500:])


@settings(max_examples=80)
@given(st.lists(st.tuples(st.booleans(), st.one_of(VALUES, st.just(-float("inf")))),
                max_size=3 * HEAD))
def test_candidates_by_order_are_the_stable_sort_of_the_masked_keys(
        nodes: list[tuple[bool, float]]) -> None:
    # The best is found by one pass and the rest sorted later: the same sequence.
    mask = np.array([m for m, _ in nodes], dtype=bool)
    order = np.array([k for _, k in nodes], dtype=np.float64)
    found = np.flatnonzero(mask)
    expected = found[np.argsort(-order[found], kind="stable")].tolist()
    assert list(visit_order.candidates(mask, order, None, 0)) == expected
