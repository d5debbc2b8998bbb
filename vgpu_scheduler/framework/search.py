"""One pod's search for its node: the candidates kube-scheduler would score, their scores,
and the pick.

kube-scheduler filters nodes from a start that rotates every cycle until it has found
``numFeasibleNodesToFind`` feasible ones (:mod:`.reach`), scores those with every score
plugin and takes the best. Filtering hundreds of nodes one by one in Python costs
milliseconds, so the search counts its candidates on the PreFilter masks instead (necessary
conditions, computed for every node at once), scores them (vectorised where the plugins
can), and runs the filters on the node it is about to pick. A node the filters reject
leaves the candidates, the next one in rotating order takes its place, and the candidates
are scored again: the answer is the best of the first candidates that pass, as
kube-scheduler's, wherever the masks are exact. Where they are loose (a node they keep
fails the filters again and again) or a score plugin can only score node by node, the
search filters nodes one by one in rotating order, exactly as kube-scheduler does.

The candidates' order, never a policy's, decides which nodes are candidates: a GPU
placement policy (binpack, spread, fragmentation-aware, HAMi's) is one score among the
others. Ties go to the node the first score computed for every node at PreFilter ranks
higher (the GPU placement policy's), then to the lower snapshot position, so that nodes
fill one after the other among equals (kube-scheduler draws at random among them). A node
where the pod would wait at Permit behind a pod in flight loses its GPU placement score.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework import reach
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.schedule_result import PreFiltered
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import Code, Status

#: Filter rejections of masked-in candidates after which the search filters one by one.
LOOSE_MASK_FAILURES = 8

Positions = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


class Scorer(NamedTuple):
    """A score plugin of the profile, as the search uses it."""

    plugin: Any
    weight: int
    #: It rescales its scores (NormalizeScore).
    normalizes: bool
    #: It scores many nodes at once (``BulkScorePlugin``).
    bulk: bool
    #: Its score ranks GPU placements (the vGPU plugin's node policy, a plugin that
    #: provides a GPU policy): what a node where the pod would wait at Permit loses.
    gpu: bool


@dataclass
class Found:
    """The search's outcome: the node (None: none fits), the filters' rejections by node
    name, how many nodes the filters ran on and how many candidates were scored, and how
    far the next cycle's start moves."""

    node: NodeInfo | None
    statuses: dict[str, Status] = field(default_factory=dict)
    evaluated: int = 0
    scored: int = 0
    processed: int = 0
    #: The node's snapshot position (-1: none).
    position: int = -1


@dataclass
class _Scored:
    totals: Floats
    #: The weighted GPU placement part of each total (None: no node can lose it).
    gpu: Floats | None
    tie: Floats | None
    #: The last tie-break, lowest first (see :func:`pick`): the snapshot position.
    rank: npt.NDArray[np.int64]


def _live(info: NodeInfo | None) -> NodeInfo:
    # Candidates are live positions: every mask starts from the snapshot's own.
    if info is None:
        raise AssertionError("a candidate position holds no node")
    return info


def pick(totals: Floats, tie: Floats | None, rank: npt.NDArray[np.int64]) -> int:
    """The best candidate: the highest total; among equal totals the highest ``tie``
    value; then the lowest ``rank``. Totals are never NaN (:meth:`Search._score`)."""
    best = int(np.argmax(totals))
    ties = np.flatnonzero(totals == totals[best])
    if len(ties) == 1:
        return best
    if tie is not None:
        values = tie[ties]
        if np.isnan(values).any():
            values = np.where(np.isnan(values), -np.inf, values)
        ties = ties[values == values.max()]
    return int(ties[int(np.argmin(rank[ties]))])


class Search:
    """The search of one cycle (see the module docstring)."""

    def __init__(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, *,
                 pre: PreFiltered, filters: Sequence[Any], scorers: Sequence[Scorer]) -> None:
        self.state, self.pod, self.snapshot = state, pod, snapshot
        self.pre = pre
        self.filters = filters
        self.scorers = scorers
        self.found = Found(None)
        self._passed: set[int] = set()
        self._failed: set[int] = set()
        self._waiting: set[int] = set()
        self._asked: set[int] = set()
        waits = pre.waits
        self._waits: Callable[[NodeInfo], bool] | None = (
            waits[0] if len(waits) == 1 else
            (lambda info: any(w(info) for w in waits)) if waits else None)

    def run(self, start: int, count: int) -> Found:
        """The node for the pod among ``count`` candidates from ``start``."""
        one_by_one = any(not s.bulk and s.plugin.name not in self.pre.scores
                         for s in self.scorers)
        if not one_by_one:
            one_by_one = not self._on_masks(start, count)
        if one_by_one:
            self._one_by_one(start, count)
        return self.found

    # -- candidates counted on the masks ---------------------------------------------------

    def _on_masks(self, start: int, count: int) -> bool:
        """Pick among the first ``count`` masked-in nodes from ``start``, filtering only the
        node about to be picked; False when the masks proved loose (filter one by one)."""
        mask = self.pre.mask.copy()
        failures = 0
        while True:
            positions, processed = reach.window(mask, start, count)
            self.found.processed = processed
            if not len(positions):
                return True
            scored = self._score(positions)
            while True:
                i = pick(scored.totals, scored.tie, scored.rank)
                pos = int(positions[i])
                if pos not in self._passed and not self._passes(pos):
                    failures += 1
                    if failures > LOOSE_MASK_FAILURES:
                        return False
                    mask[pos] = False
                    break  # the next node in rotating order joins; score again
                if self._demoted(pos, i, scored):
                    continue
                self.found.node, self.found.position = self.snapshot.nodes[pos], pos
                return True

    # -- kube-scheduler's way: filter one by one -------------------------------------------

    def _one_by_one(self, start: int, count: int) -> None:
        """Filter nodes in rotating order from ``start`` until ``count`` fit, then score
        those (kube-scheduler's ``findNodesThatPassFilters``)."""
        positions, _ = reach.window(self.pre.mask, start, len(self.pre.mask))
        feasible: list[int] = []
        size = len(self.pre.mask)
        self.found.processed = size
        for pos in positions.tolist():
            if pos in self._failed:
                continue
            if pos in self._passed or self._passes(pos):
                feasible.append(pos)
                if len(feasible) >= count:
                    self.found.processed = (pos - start) % size + 1
                    break
        if not feasible:
            return
        chosen = np.array(feasible, dtype=np.int64)
        scored = self._score(chosen)
        while True:
            i = pick(scored.totals, scored.tie, scored.rank)
            if not self._demoted(int(chosen[i]), i, scored):
                pos = int(chosen[i])
                self.found.node, self.found.position = self.snapshot.nodes[pos], pos
                return

    # -- steps -----------------------------------------------------------------------------

    def _passes(self, pos: int) -> bool:
        info = self.snapshot.nodes[pos]
        if info is None:
            return False
        self.found.evaluated += 1
        for f in self.filters:
            status: Status = f.filter(self.state, self.pod, info)
            if status.code is not Code.SUCCESS:
                self.found.statuses[info.name] = status.with_plugin(f.name)
                self._failed.add(pos)
                return False
        self._passed.add(pos)
        return True

    def _demoted(self, pos: int, i: int, scored: _Scored) -> bool:
        """Whether the pod would wait at Permit on the node at ``pos`` (asked once per
        node): it then loses its GPU placement score, and the pick is made again."""
        if self._waits is None or pos in self._asked:
            return False
        self._asked.add(pos)
        info = self.snapshot.nodes[pos]
        if info is None or not self._waits(info):
            return False
        self._waiting.add(pos)
        gpu = scored.gpu
        if gpu is None or not gpu[i]:
            return False
        scored.totals[i] -= gpu[i]
        gpu[i] = 0.0
        return True

    def _score(self, positions: Positions) -> _Scored:
        """Every weighted score of the candidates at ``positions``, summed."""
        self.found.scored = len(positions)
        infos: list[NodeInfo] | None = None
        if any(not s.bulk and s.plugin.name not in self.pre.scores for s in self.scorers):
            nodes = self.snapshot.nodes
            infos = [_live(nodes[p]) for p in positions.tolist()]
            self._pre_score(infos)
        totals: Floats | None = None
        gpu: Floats | None = None
        scored_by: list[str] = []
        for scorer in self.scorers:
            if scorer.plugin.name in self.state.skip_score:
                continue
            values = self._values(scorer, positions, infos)
            if values is None:
                continue
            scored_by.append(scorer.plugin.name)
            # Every array handed here is the search's own (plugins return fresh ones).
            weighted = values * float(scorer.weight) if scorer.weight != 1 else values
            totals = weighted if totals is None else totals + weighted
            if scorer.gpu and self._waits is not None:
                gpu = weighted.copy() if gpu is None else gpu + weighted
        if totals is None:
            totals = np.zeros(len(positions), dtype=np.float64)
        elif np.isnan(totals).any():
            totals[np.isnan(totals)] = -np.inf
        if gpu is not None and self._waiting:
            waiting = np.isin(positions, np.fromiter(self._waiting, np.int64))
            totals -= np.where(waiting, gpu, 0.0)
            gpu[waiting] = 0.0
        first = next(iter(self.pre.scores), None)
        # Totals that tie on the first score alone tie on it too.
        tie = None if first is None or scored_by == [first] else \
            self.pre.scores[first][positions]
        return _Scored(totals, gpu, tie, positions)

    def _pre_score(self, infos: list[NodeInfo]) -> None:
        for scorer in self.scorers:
            plugin = scorer.plugin
            if (scorer.bulk or plugin.name in self.pre.scores
                    or plugin.name in self.state.skip_score):
                continue
            pre_score = getattr(plugin, "pre_score", None)
            if pre_score is not None:
                status: Status = pre_score(self.state, self.pod, infos)
                if status.code is Code.SKIP:
                    self.state.skip_score.add(plugin.name)

    def _values(self, scorer: Scorer, positions: Positions,
                infos: list[NodeInfo] | None) -> Floats | None:
        """One plugin's final scores of the candidates, None when it skips."""
        plugin = scorer.plugin
        provided = self.pre.scores.get(plugin.name)
        if provided is not None:
            values: Floats = provided[positions]
            if not np.isfinite(values).all():
                # A node the plugin finds no place on (-inf) scores its lowest, 0.
                values[~np.isfinite(values)] = 0.0
        elif scorer.bulk:
            bulk: Floats | None = plugin.score_nodes(self.state, self.pod, self.snapshot,
                                                     positions)
            return bulk
        else:
            assert infos is not None
            values = np.array([plugin.score(self.state, self.pod, n) for n in infos],
                              dtype=np.float64)
        if scorer.normalizes:
            listed = values.tolist()
            plugin.normalize_scores(self.state, self.pod, listed)
            values = np.array(listed, dtype=np.float64)
        return values
