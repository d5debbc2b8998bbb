"""The PreFilter order the filters visit nodes in: the partial sort equals a full one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.runtime import HEAD, best_first

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
