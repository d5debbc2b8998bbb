"""Go's ``sort.Sort``, step for step, so that elements its ``Less`` leaves unordered end
where HAMi's scheduler (built with Go 1.26) leaves them (docs/hami-migration.md#gpu-policies).

Go sorts by pattern-defeating quicksort: a run of at most 12 elements by insertion sort,
which keeps equal elements in their order (so HAMi's sort of a node's GPUs is stable below
13 GPUs), a longer one by partitions whose pivots, pattern breaking (a xorshift seeded with
the length) and fallback to heapsort are deterministic. The order of equal elements then
follows from the input order and the comparisons made, which is why this follows Go's
sequence of ``Less`` calls and swaps rather than sorting some other way.

Pure; ``less(x, y)`` compares elements, as a Go ``Less(i, j)`` compares the elements at i
and j.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Less = Callable[[T, T], bool]

_MAX_INSERTION = 12
_SHORTEST_NINTHER = 50
_MAX_SWAPS = 4 * 3
_MAX_STEPS = 5
_SHORTEST_SHIFTING = 50
_UNKNOWN, _INCREASING, _DECREASING = 0, 1, 2
_U64 = (1 << 64) - 1


def sort(data: MutableSequence[T], less: Less[T]) -> None:
    """Sort ``data`` in place exactly as Go's ``sort.Sort`` would."""
    n = len(data)
    if n > 1:
        _Sorter(data, less).pdqsort(0, n, n.bit_length())


def sort_by_key(data: MutableSequence[T], key: Callable[[T], Any]) -> None:
    """:func:`sort` where ``Less`` compares ``key``s with ``<``: up to 12 elements Go sorts
    by insertion, which is Python's stable sort by the key (and that runs in C)."""
    if len(data) <= _MAX_INSERTION:
        data[:] = sorted(data, key=key)
    else:
        sort(data, lambda a, b: key(a) < key(b))


class _Sorter(Generic[T]):
    def __init__(self, data: MutableSequence[T], less: Less[T]) -> None:
        self.data = data
        self.less_ = less

    def less(self, i: int, j: int) -> bool:
        return self.less_(self.data[i], self.data[j])

    def swap(self, i: int, j: int) -> None:
        d = self.data
        d[i], d[j] = d[j], d[i]

    def insertion(self, a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and self.less(j, j - 1):
                self.swap(j, j - 1)
                j -= 1

    def sift_down(self, lo: int, hi: int, first: int) -> None:
        root = lo
        while True:
            child = 2 * root + 1
            if child >= hi:
                return
            if child + 1 < hi and self.less(first + child, first + child + 1):
                child += 1
            if not self.less(first + root, first + child):
                return
            self.swap(first + root, first + child)
            root = child

    def heap(self, a: int, b: int) -> None:
        hi = b - a
        for i in range((hi - 1) // 2, -1, -1):
            self.sift_down(i, hi, a)
        for i in range(hi - 1, -1, -1):
            self.swap(a, a + i)
            self.sift_down(0, i, a)

    def pdqsort(self, a: int, b: int, limit: int) -> None:
        balanced = partitioned = True
        while True:
            length = b - a
            if length <= _MAX_INSERTION:
                self.insertion(a, b)
                return
            if limit == 0:
                self.heap(a, b)
                return
            if not balanced:
                self.break_patterns(a, b)
                limit -= 1
            pivot, hint = self.choose_pivot(a, b)
            if hint == _DECREASING:
                self.reverse(a, b)
                pivot = (b - 1) - (pivot - a)
                hint = _INCREASING
            if balanced and partitioned and hint == _INCREASING \
                    and self.partial_insertion(a, b):
                return
            if a > 0 and not self.less(a - 1, pivot):
                a = self.partition_equal(a, b, pivot)
                continue
            mid, partitioned = self.partition(a, b, pivot)
            left, right = mid - a, b - mid
            threshold = length // 8
            if left < right:
                balanced = left >= threshold
                self.pdqsort(a, mid, limit)
                a = mid + 1
            else:
                balanced = right >= threshold
                self.pdqsort(mid + 1, b, limit)
                b = mid

    def partition(self, a: int, b: int, pivot: int) -> tuple[int, bool]:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while i <= j and self.less(i, a):
            i += 1
        while i <= j and not self.less(j, a):
            j -= 1
        if i > j:
            self.swap(j, a)
            return j, True
        self.swap(i, j)
        i, j = i + 1, j - 1
        while True:
            while i <= j and self.less(i, a):
                i += 1
            while i <= j and not self.less(j, a):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i, j = i + 1, j - 1
        self.swap(j, a)
        return j, False

    def partition_equal(self, a: int, b: int, pivot: int) -> int:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while True:
            while i <= j and not self.less(a, i):
                i += 1
            while i <= j and self.less(a, j):
                j -= 1
            if i > j:
                return i
            self.swap(i, j)
            i, j = i + 1, j - 1

    def partial_insertion(self, a: int, b: int) -> bool:
        i = a + 1
        for _ in range(_MAX_STEPS):
            while i < b and not self.less(i, i - 1):
                i += 1
            if i == b:
                return True
            if b - a < _SHORTEST_SHIFTING:
                return False
            self.swap(i, i - 1)
            if i - a >= 2:
                # Go shifts down to index 1, not to a: kept, since it decides where
                # equal elements end.
                for j in range(i - 1, 0, -1):
                    if not self.less(j, j - 1):
                        break
                    self.swap(j, j - 1)
            if b - i >= 2:
                for j in range(i + 1, b):
                    if not self.less(j, j - 1):
                        break
                    self.swap(j, j - 1)
        return False

    def break_patterns(self, a: int, b: int) -> None:
        length = b - a
        if length < 8:
            return
        state = length
        modulus = 1 << length.bit_length()
        for idx in range(a + (length // 4) * 2 - 1, a + (length // 4) * 2 + 2):
            state ^= (state << 13) & _U64
            state ^= state >> 7
            state ^= (state << 17) & _U64
            other = state & (modulus - 1)
            if other >= length:
                other -= length
            self.swap(idx, a + other)

    def choose_pivot(self, a: int, b: int) -> tuple[int, int]:
        length = b - a
        swaps = [0]
        i, j, k = a + length // 4, a + length // 4 * 2, a + length // 4 * 3
        if length >= 8:
            if length >= _SHORTEST_NINTHER:
                i = self.median(i - 1, i, i + 1, swaps)
                j = self.median(j - 1, j, j + 1, swaps)
                k = self.median(k - 1, k, k + 1, swaps)
            j = self.median(i, j, k, swaps)
        if swaps[0] == 0:
            return j, _INCREASING
        if swaps[0] == _MAX_SWAPS:
            return j, _DECREASING
        return j, _UNKNOWN

    def order2(self, a: int, b: int, swaps: list[int]) -> tuple[int, int]:
        if self.less(b, a):
            swaps[0] += 1
            return b, a
        return a, b

    def median(self, a: int, b: int, c: int, swaps: list[int]) -> int:
        a, b = self.order2(a, b, swaps)
        b, c = self.order2(b, c, swaps)
        a, b = self.order2(a, b, swaps)
        return b

    def reverse(self, a: int, b: int) -> None:
        i, j = a, b - 1
        while i < j:
            self.swap(i, j)
            i, j = i + 1, j - 1
