"""Go's ``math/rand`` (Go 1 stream), so a replay sees the same arrival order as the paper.

The FGD artifact orders the trace with ``rand.Seed(seed)`` followed by ``rand.Shuffle`` and
tops it up with ``rand.Intn``. Python's ``random`` is a different generator, so the
arrival order would differ from the published runs; this module reproduces Go's stream
bit for bit: the additive lagged Fibonacci source (length 607, tap 273) seeded through the
Park–Miller ``seedrand`` recurrence and mixed with ``rngCooked``, plus the derived methods
exactly as ``rand.go`` defines them (``Int31n``'s rejection bound, ``Shuffle``'s
multiply-shift ``int31n``, ``Perm``'s inside-out loop).
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from typing import TypeVar

from vgpu_simulate._gocooked import RNG_COOKED

_LEN = 607
_TAP = 273
_MASK = (1 << 63) - 1
_A = 48271
_M = (1 << 31) - 1
_Q = 44488
_R = 3399
_INT32_MAX = (1 << 31) - 1

T = TypeVar("T")


def _seedrand(x: int) -> int:
    """One step of x ← 48271·x mod (2³¹−1), Schrage's method, as Go writes it."""
    hi, lo = divmod(x, _Q)
    x = _A * lo - _R * hi
    if x < 0:
        x += _M
    return x


class GoRand:
    """``rand.New(rand.NewSource(seed))``; also what ``rand.Seed(seed)`` gives the globals."""

    __slots__ = ("_feed", "_tap", "_vec")

    def __init__(self, seed: int) -> None:
        self._vec = [0] * _LEN
        self._tap = 0
        self._feed = 0
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self._tap = 0
        self._feed = _LEN - _TAP
        seed %= _M  # Python's % is already non-negative, as Go's "if seed < 0 { += M }"
        if seed == 0:
            seed = 89482311
        x = seed
        vec = self._vec
        for i in range(-20, _LEN):
            x = _seedrand(x)
            if i >= 0:
                u = x << 40
                x = _seedrand(x)
                u ^= x << 20
                x = _seedrand(x)
                u ^= x
                u ^= RNG_COOKED[i]
                vec[i] = u & _MASK

    def int63(self) -> int:
        tap = self._tap - 1
        if tap < 0:
            tap += _LEN
        feed = self._feed - 1
        if feed < 0:
            feed += _LEN
        self._tap, self._feed = tap, feed
        x = (self._vec[feed] + self._vec[tap]) & _MASK
        self._vec[feed] = x
        return x

    def uint32(self) -> int:
        return self.int63() >> 31

    def int31(self) -> int:
        return self.int63() >> 32

    def int63n(self, n: int) -> int:
        if n <= 0:
            raise ValueError("invalid argument to Int63n")
        if n & (n - 1) == 0:
            return self.int63() & (n - 1)
        bound = (1 << 63) - 1 - (1 << 63) % n
        v = self.int63()
        while v > bound:
            v = self.int63()
        return v % n

    def int31n(self, n: int) -> int:
        if n <= 0:
            raise ValueError("invalid argument to Int31n")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        bound = (1 << 31) - 1 - (1 << 31) % n
        v = self.int31()
        while v > bound:
            v = self.int31()
        return v % n

    def intn(self, n: int) -> int:
        if n <= 0:
            raise ValueError("invalid argument to Intn")
        if n <= _INT32_MAX:
            return self.int31n(n)
        return self.int63n(n)

    def _int31n_lemire(self, n: int) -> int:
        """Go's unexported ``int31n``: multiply-shift with rejection (used by Shuffle)."""
        prod = self.uint32() * n
        low = prod & 0xFFFFFFFF
        if low < n:
            thresh = ((1 << 32) - n) % n
            while low < thresh:
                prod = self.uint32() * n
                low = prod & 0xFFFFFFFF
        return prod >> 32

    def shuffle(self, n: int, swap: Callable[[int, int], None]) -> None:
        if n < 0:
            raise ValueError("invalid argument to Shuffle")
        i = n - 1
        while i > _INT32_MAX - 1:
            swap(i, self.int63n(i + 1))
            i -= 1
        while i > 0:
            swap(i, self._int31n_lemire(i + 1))
            i -= 1

    def shuffle_list(self, items: MutableSequence[T]) -> None:
        """``rand.Shuffle(len(items), func(i, j) { items[i], items[j] = items[j], items[i] })``."""

        def swap(i: int, j: int) -> None:
            items[i], items[j] = items[j], items[i]

        self.shuffle(len(items), swap)

    def perm(self, n: int) -> list[int]:
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m
