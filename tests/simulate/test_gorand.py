"""Go's math/rand stream, checked against Go's own golden values.

The seed-0 vectors are ``regressGolden`` from Go's ``src/math/rand/regress_test.go`` (the
values Go promises never to change); the seed-42 ones are widely quoted outputs of
``rand.New(rand.NewSource(42))``. Shuffle has no golden vector in Go, so its expectation
is derived here by hand from the golden ``Uint32`` stream and the documented algorithm.
"""

from __future__ import annotations

import pytest

from vgpu_simulate.gorand import GoRand

INT63_SEED0 = [
    8717895732742165505, 2259404117704393152, 6050128673802995827, 501233450539197794,
    3390393562759376202, 2669985732393126063, 1774932891286980153, 6044372234677422456,
    8274930044578894929, 1543572285742637646, 2661732831099943416, 8325060299420976708,
    7837839688282259259, 2518412263346885298, 5617773211005988520, 2339563716805116249,
    7144924247938981575, 161231572858529631, 7259475919510918339, 7373105480197164748,
]
UINT32_SEED0 = [
    4059586549, 1052117029, 2817310706, 233405013, 1578775030, 1243308993, 826517535,
    2814630155, 3853314576, 718781857, 1239465936, 3876658295, 3649778518, 1172727096,
    2615979505, 1089444252, 3327114623, 75079301, 3380456901, 3433369789,
]
INT32S = [1, 10, 32, 1 << 20, (1 << 20) + 1, 1000000000, 1 << 30, (1 << 31) - 2, (1 << 31) - 1]
INT31N_SEED0 = [0, 4, 25, 310570, 857611, 621654496, 413258767, 1407315077, 1926657288,
                0, 8, 27, 367019, 209005, 307989752, 544722126, 1663557311, 37539650, 0, 4]
INT64S = [1, 10, 32, 1 << 20, (1 << 20) + 1, 1000000000, 1 << 30, (1 << 31) - 2, (1 << 31) - 1,
          1000000000000000000, 1 << 60, (1 << 63) - 2, (1 << 63) - 1]
INT63N_SEED0 = [0, 2, 19, 959842, 688912, 393126063, 89212473, 834026388, 1577188963,
                543572285742637646, 355889821886249464, 8325060299420976708,
                7837839688282259259, 0, 0, 25, 679623, 882178, 510918339, 782454476]
INTN_SEED0 = [0, 4, 25, 310570, 857611, 621654496, 413258767, 1407315077, 1926657288,
              543572285742637646, 355889821886249464, 8325060299420976708,
              7837839688282259259, 0, 2, 14, 515775, 839455, 690228450, 642943070]
PERM_SIZES = [0, 1, 5, 8, 9, 10, 16]
PERM_SEED0 = [
    [], [0], [0, 4, 1, 3, 2], [3, 1, 0, 4, 7, 5, 2, 6], [5, 0, 3, 6, 7, 4, 2, 1, 8],
    [4, 5, 0, 2, 6, 9, 3, 1, 8, 7], [14, 2, 0, 8, 3, 5, 13, 12, 1, 4, 6, 7, 11, 9, 15, 10],
    [], [0], [3, 0, 1, 2, 4], [5, 1, 2, 0, 4, 7, 3, 6], [4, 0, 6, 8, 1, 5, 2, 7, 3],
    [8, 6, 1, 7, 5, 4, 3, 2, 9, 0], [0, 3, 13, 2, 15, 4, 10, 1, 8, 14, 7, 6, 12, 9, 5, 11],
    [], [0], [0, 4, 2, 1, 3], [2, 1, 7, 0, 6, 3, 4, 5], [8, 7, 5, 3, 4, 6, 0, 1, 2],
    [1, 0, 2, 5, 7, 6, 9, 8, 3, 4],
]


@pytest.mark.parametrize(("method", "args", "expected"), [
    ("int63", [()] * 20, INT63_SEED0),
    ("uint32", [()] * 20, UINT32_SEED0),
    ("int31", [()] * 3, [2029793274, 526058514, 1408655353]),
    ("int31n", [(INT32S[i % len(INT32S)],) for i in range(20)], INT31N_SEED0),
    ("int63n", [(INT64S[i % len(INT64S)],) for i in range(20)], INT63N_SEED0),
    ("intn", [(INT64S[i % len(INT64S)],) for i in range(20)], INTN_SEED0),
    ("perm", [(PERM_SIZES[i % len(PERM_SIZES)],) for i in range(20)], PERM_SEED0),
])
def test_matches_go_regress_golden_values(method: str, args: list[tuple[int, ...]],
                                          expected: list[object]) -> None:
    rng = GoRand(0)
    assert [getattr(rng, method)(*a) for a in args] == expected


def test_seed_42_matches_quoted_go_outputs() -> None:
    rng = GoRand(42)
    assert [rng.int63() for _ in range(5)] == [
        3440579354231278675, 608747136543856411, 5571782338101878760, 1926012586526624009,
        404153945743547657]
    rng.seed(42)
    rng.int63()
    assert rng.intn(10) == 7  # rand.Seed(42); rand.Int(); rand.Intn(10)


def test_seed_is_taken_modulo_2_31_minus_1_and_zero_is_replaced() -> None:
    assert GoRand((1 << 31) - 1).int63() == GoRand(0).int63() == GoRand(89482311).int63()
    assert GoRand(-1).int63() == GoRand((1 << 31) - 2).int63()


def _lemire(n: int, stream: list[int]) -> tuple[int, int]:
    """(result, values consumed) of Go's int31n(n) over a given Uint32 stream."""
    used = 0
    prod = stream[used] * n
    used += 1
    low = prod & 0xFFFFFFFF
    if low < n:
        thresh = ((1 << 32) - n) % n
        while low < thresh:
            prod = stream[used] * n
            used += 1
            low = prod & 0xFFFFFFFF
    return prod >> 32, used


def test_shuffle_is_fisher_yates_downward_with_multiply_shift() -> None:
    # Shuffle(5): i = 4..1, j = int31n(i + 1) = (Uint32 * (i + 1)) >> 32.
    expected = list(range(5))
    stream = list(UINT32_SEED0)
    for i in range(4, 0, -1):
        j, used = _lemire(i + 1, stream)
        del stream[:used]
        expected[i], expected[j] = expected[j], expected[i]
    items = list(range(5))
    GoRand(0).shuffle_list(items)
    assert items == expected == [2, 3, 1, 0, 4]


def test_shuffle_swaps_and_keeps_every_element() -> None:
    swaps: list[tuple[int, int]] = []
    GoRand(7).shuffle(6, lambda i, j: swaps.append((i, j)))
    assert [i for i, _ in swaps] == [5, 4, 3, 2, 1]
    assert all(0 <= j <= i for i, j in swaps)
    items = list(range(100))
    GoRand(7).shuffle_list(items)
    assert sorted(items) == list(range(100)) and items != list(range(100))


@pytest.mark.parametrize("method", ["int63n", "int31n", "intn"])
def test_non_positive_bounds_are_refused(method: str) -> None:
    with pytest.raises(ValueError):
        getattr(GoRand(1), method)(0)
