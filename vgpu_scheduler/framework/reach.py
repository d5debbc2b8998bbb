"""How far the scheduling algorithm looks: kube-scheduler's number of feasible nodes to
find, and the window of candidates from a start that rotates every cycle.

Pure: the cluster's size, the configured percentage, the PreFilter's mask and where the
last cycle stopped in; counts and positions out.

kube-scheduler (``numFeasibleNodesToFind``, the same formula from v1.20 to now) stops
filtering once it has found that many feasible nodes and scores only those, starting each
cycle where the previous one stopped, so that every node is looked at over time and no
visit order decides which nodes are candidates.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: Below this many nodes every node is looked at; never fewer feasible nodes are sought.
MIN_FEASIBLE_NODES_TO_FIND = 100
#: The adaptive percentage never falls below this.
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
#: The adaptive percentage at 0 nodes, falling by one per 125 nodes.
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50


def feasible_to_find(num_nodes: int, percentage: int) -> int:
    """How many feasible nodes to find among ``num_nodes``: ``percentage`` of them (0:
    adaptive, 50 % falling to 5 % from 5,625 nodes on), never fewer than 100, and every
    node below 100 nodes or at 100 %. Integer arithmetic, as kube-scheduler's int32."""
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_nodes
    if percentage <= 0:
        percentage = max(BASE_PERCENTAGE_OF_NODES_TO_SCORE - num_nodes // 125,
                         MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def window(mask: npt.NDArray[np.bool_], start: int,
           count: int) -> tuple[npt.NDArray[np.int64], int]:
    """The first ``count`` positions ``mask`` keeps, in position order from ``start``
    round to the beginning, and how many positions that took, up to the last of them
    (what the next cycle's start moves by: all of them when the mask keeps fewer than
    ``count``, as kube-scheduler's ``nextStartNodeIndex`` after it looked at every
    node)."""
    size = len(mask)
    if size == 0:
        return np.zeros(0, dtype=np.int64), 0
    start %= size
    found = np.flatnonzero(mask)
    if len(found) < count:
        cut = int(np.searchsorted(found, start))
        return np.concatenate((found[cut:], found[:cut])), size
    cut = int(np.searchsorted(found, start))
    head = found[cut:cut + count]
    if len(head) < count:
        head = np.concatenate((head, found[:count - len(head)]))
    return head, (int(head[-1]) - start) % size + 1
