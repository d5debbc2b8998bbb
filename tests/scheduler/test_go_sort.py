"""Go's sort.Sort, step for step (vgpu_scheduler/placement/go_sort.py): where it leaves
equal elements is what HAMi's GPU order among equals follows.

The vectors are Go's own answers: ``sort.Sort`` of Go 1.26 (its pdqsort, the xorshift of
Go 1.22 on) over items whose ``Less`` compares the key alone, run on these keys; the port
agreed with Go on 3,000 random key lists of 1 to 140 items when it was written."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu_scheduler.placement import go_sort

GO_VECTORS = [
    # 13 items: the shortest that Go does not sort by insertion.
    ([2, 1, 2, 1, 1, 1, 0, 2, 1, 1, 1, 2, 1], [6, 3, 4, 5, 1, 8, 9, 10, 12, 2, 0, 7, 11]),
    ([0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0], [10, 1, 2, 0, 12, 5, 11, 7, 8, 9, 3, 6, 4]),
    ([0, 0, 0, 1, 2, 2, 2, 0, 2, 2, 1, 2, 2, 1, 1, 0, 0, 1, 0, 1, 0, 2, 1],
     [0, 1, 2, 20, 18, 16, 15, 7, 10, 17, 22, 3, 19, 13, 14, 6, 5, 9, 4, 12, 11, 21, 8]),
    # Pattern breaking decides this one: Go before 1.22 (another xorshift) orders it otherwise.
    ([1, 0, 1, 1, 1, 1, 0, 2, 2, 0, 2, 2, 1, 0, 2, 2, 0, 0, 0, 0, 2, 0, 2, 0, 2, 2, 0, 1, 1, 1,
      0, 1, 0, 2, 0, 2, 1, 2, 2, 0],
     [18, 19, 23, 13, 21, 30, 6, 39, 32, 9, 17, 34, 1, 16, 26, 31, 29, 0, 36, 12, 5, 4, 3, 2,
      28, 27, 10, 25, 24, 22, 20, 15, 14, 33, 11, 35, 8, 37, 38, 7]),
    # 50 items: the ninther pivot and the partial insertion sort's shifting.
    ([16, 16, 24, 47, 15, 45, 44, 21, 42, 41, 20, 13, 12, 18, 18, 17, 17, 16, 16, 31, 15, 14,
      28, 13, 13, 25, 8, 11, 11, 10, 10, 19, 18, 8, 16, 15, 14, 4, 6, 3, 5, 4, 2, 7, 3, 1, 4,
      3, 0, 1],
     [48, 49, 45, 42, 39, 47, 44, 46, 37, 41, 40, 38, 43, 26, 33, 30, 29, 28, 27, 12, 24, 23,
      11, 21, 36, 4, 20, 35, 18, 0, 1, 17, 34, 15, 16, 32, 14, 13, 31, 10, 7, 2, 25, 22, 19,
      9, 8, 6, 5, 3]),
]


def _sorted(keys: list[int]) -> list[int]:
    items = list(range(len(keys)))
    go_sort.sort(items, lambda a, b: keys[a] < keys[b])
    return items


@pytest.mark.parametrize(("keys", "go"), GO_VECTORS, ids=lambda v: str(len(v)))
def test_equal_elements_end_where_go_leaves_them(keys: list[int], go: list[int]) -> None:
    assert _sorted(keys) == go


@given(st.lists(st.integers(0, 3), max_size=12))
def test_twelve_or_fewer_sort_stably(keys: list[int]) -> None:
    assert _sorted(keys) == sorted(range(len(keys)), key=lambda i: keys[i])


@given(st.lists(st.integers(0, 5), max_size=200))
def test_any_length_sorts_and_keeps_every_item(keys: list[int]) -> None:
    got = _sorted(keys)
    assert sorted(got) == list(range(len(keys)))
    assert [keys[i] for i in got] == sorted(keys)


def test_past_twelve_go_is_not_stable() -> None:
    keys = GO_VECTORS[1][0]
    assert _sorted(keys) != sorted(range(len(keys)), key=lambda i: keys[i])


@given(st.lists(st.integers(0, 3), max_size=30))
def test_sorting_by_key_is_sorting_by_less_on_the_key(keys: list[int]) -> None:
    items = list(range(len(keys)))
    go_sort.sort_by_key(items, keys.__getitem__)
    assert items == _sorted(keys)
