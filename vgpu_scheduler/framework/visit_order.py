"""The order in which the filters visit candidate nodes.

Pure: the PreFilter's verdict (which nodes are left, an order key, which nodes to visit
last) and where the last cycle stopped in, positions out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import numpy.typing as npt

#: Candidates sorted before the filters start; the rest only if the filters reject so many.
HEAD = 256


def best_first(candidates: npt.NDArray[np.int64],
               keys: npt.NDArray[np.float64]) -> Iterator[int]:
    """``candidates`` by ``keys``, highest first, ties by position: a stable sort of all
    of them took 200 µs at 5,000 nodes, and the filters rarely look past the first
    dozens, so the best ``HEAD`` are sorted first and the others only when reached."""
    neg = -keys
    if len(neg) > 2 * HEAD:
        kth = np.partition(neg, HEAD)[HEAD]
        head = neg < kth
        # Of the keys equal to the boundary's, the first by position: on a cluster of
        # alike nodes nearly all keys tie, and the head would be every candidate.
        ties = np.flatnonzero(neg == kth)
        head[ties[: HEAD + 1 - int(np.count_nonzero(head))]] = True
        # Every key of the head sorts before every other: together, one stable sort.
        yield from candidates[head][np.argsort(neg[head], kind="stable")].tolist()
        rest = ~head
        yield from candidates[rest][np.argsort(neg[rest], kind="stable")].tolist()
        return
    yield from candidates[np.argsort(neg, kind="stable")].tolist()


def _deferring(positions: Iterable[int], last: Callable[[int], bool]) -> Iterator[int]:
    later: list[int] = []
    for pos in positions:
        if last(pos):
            later.append(pos)
        else:
            yield pos
    yield from later


def _ordered(mask: npt.NDArray[np.bool_], order: npt.NDArray[np.float64]) -> Iterator[int]:
    """Positions left by ``mask`` by ``order``, best first, ties by position: the best one
    by a single pass, the others sorted only when the filters ask past it. Most pods fit
    the first node they visit, and at 15,000 nodes the gather, partition and sort that
    every candidate's place needs took 100 µs, the first one's place 15."""
    keys = np.where(mask, order, -np.inf)
    top = int(np.argmax(keys)) if len(keys) else 0
    if len(keys) and mask[top] and not math.isnan(keys[top]):
        # The first position holding the largest key: the stable sort's first.
        yield top
        mask = mask.copy()
        mask[top] = False
    found = np.flatnonzero(mask)
    if len(found) > 1:
        yield from best_first(found, order[found])
    else:
        yield from found.tolist()


def _rotated(found: npt.NDArray[np.int64], start: int) -> Iterator[int]:
    """``found`` from ``start`` on, wrapping around, ``HEAD`` at a time: the filters stop
    at ``nodesToScore`` feasible nodes, and at 15,000 nodes turning every position into a
    Python int took 150 µs of a CPU-only pod's decision."""
    if len(found) > 1 and start:
        start %= len(found)
        found = np.concatenate((found[start:], found[:start]))
    for lo in range(0, len(found), HEAD):
        yield from found[lo:lo + HEAD].tolist()


def candidates(mask: npt.NDArray[np.bool_], order: npt.NDArray[np.float64] | None,
               last: Callable[[int], bool] | None, next_start: int) -> Iterable[int]:
    """Positions left by ``mask``: best first by ``order``; without one, rotated to start at
    ``next_start`` so that successive pods spread over the nodes. Positions ``last`` holds
    for come after all others, in the same order among themselves; ``last`` is asked only
    of the positions the caller reaches (the filters stop at ``nodesToScore`` feasible
    nodes), so its cost follows the nodes visited, not the cluster's size."""
    positions: Iterable[int]
    if order is not None:
        positions = _ordered(mask, order)
    else:
        positions = _rotated(np.flatnonzero(mask), next_start)
    if last is None:
        return positions
    return _deferring(positions, last)
