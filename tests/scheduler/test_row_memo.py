"""Arrays derived row by row agree with a computation over every row.

The snapshot's change log (``Snapshot.changed_since``) and the memo built on it
(``RowMemo``), alone and under the plugins that keep their PreFilter masks, order keys and
failure explanations in one, on a scheduler whose nodes and pods change at random.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.scheduler.test_property import SchedulerMachine
from vgpu_scheduler.framework import snapshot as snap
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.podinfo import parse
from vgpu_scheduler.framework.row_memo import ALL, RowMemo, Rows
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import Code


@dataclass(frozen=True)
class _Node:
    """Stands in for a NodeInfo: the snapshot reads its name and the columns its value."""

    name: str
    value: int


def _snapshot() -> Snapshot:
    return Snapshot([Column("v", np.int64, lambda n: n.value, -1)], capacity=2)


@pytest.mark.parametrize(("steps", "since", "expected"), [
    ([], 0, []),
    ([("set", "a", 1)], 0, [0]),
    ([("set", "a", 1), ("set", "b", 2)], 1, [1]),
    ([("set", "a", 1), ("set", "b", 2), ("remove", "a", 0)], 1, [1, 0]),
    ([("set", "a", 1), ("set", "a", 2)], 0, [0, 0]),
    # A generation the snapshot has not reached: nothing can be said.
    ([("set", "a", 1)], 2, None),
    ([("set", "a", 1)], -1, None),
])
def test_changed_since(steps: list[tuple[str, str, int]], since: int,
                       expected: list[int] | None) -> None:
    s = _snapshot()
    for op, name, value in steps:
        s.set(_Node(name, value)) if op == "set" else s.remove(name)
    assert s.changed_since(since) == expected


def test_changed_since_forgets_what_the_log_no_longer_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snap, "CHANGE_LOG", 3)
    s = _snapshot()
    for i in range(10):
        s.set(_Node(f"n{i % 4}", i))
    assert s.changed_since(0) is None
    assert s.changed_since(9) == [1]
    assert s.changed_since(s.generation) == []


class MemoMachine(RuleBasedStateMachine):
    """Random sets, removals and reads: every read equals the full computation."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshot = _snapshot()
        self.memo = RowMemo(size=2)
        self.calls: list[int] = []

    def _compute(self, threshold: int) -> Any:
        def compute(rows: Rows) -> Any:
            self.calls.append(len(self.snapshot.column("v")[rows]))
            return self.snapshot.column("v")[rows] >= threshold
        return compute

    @rule(name=st.sampled_from("abcdefgh"), value=st.integers(-5, 5))
    def set_node(self, name: str, value: int) -> None:
        self.snapshot.set(_Node(name, value))

    @rule(name=st.sampled_from("abcdefgh"))
    def remove_node(self, name: str) -> None:
        self.snapshot.remove(name)

    @rule(threshold=st.integers(-2, 2))
    def read(self, threshold: int) -> None:
        got = self.memo.get(threshold, self.snapshot, self._compute(threshold))
        assert not got.flags.writeable
        assert got.tolist() == (self.snapshot.column("v") >= threshold).tolist()

    @invariant()
    def reads_stay_cheap(self) -> None:
        # Sanity of the test itself: row updates happen (not every read is a full one).
        assert all(n <= len(self.snapshot.nodes) for n in self.calls)


MemoMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                         deadline=None)
test_memo_agrees_with_full_computation = MemoMachine.TestCase


def test_memo_updates_only_changed_rows() -> None:
    s = _snapshot()
    for i in range(100):
        s.set(_Node(f"n{i}", i))
    memo, seen = RowMemo(), []

    def compute(rows: Rows) -> Any:
        seen.append(rows)
        return s.column("v")[rows] * 2

    memo.get("k", s, compute)
    s.set(_Node("n7", 1000))
    got = memo.get("k", s, compute)
    assert seen[0] == ALL and seen[1].tolist() == [7]
    assert got[7] == 2000 and got[8] == 16


def _fresh_memos(plugin: Any) -> list[tuple[Any, str, RowMemo]]:
    """Swap every RowMemo a plugin (or its index) keeps for an empty one; returns the
    swapped ones, to put back."""
    swapped = []
    for owner in (plugin, getattr(plugin, "index", None)):
        if owner is None:
            continue
        for attr, value in list(vars(owner).items()):
            if isinstance(value, RowMemo):
                swapped.append((owner, attr, value))
                setattr(owner, attr, RowMemo())
    return swapped


def _answers(framework: Any, pod: Any, snapshot: Snapshot, now: float) -> list[Any]:
    out: list[Any] = []
    for plugin in framework.pre_filters:
        state = CycleState(now, snapshot)
        result, status = plugin.pre_filter(state, pod, snapshot)
        out.append((plugin.name, status.code, None if result is None else (
            None if result.mask is None else result.mask.tolist(),
            None if result.scores is None else result.scores.tolist())))
        explain = getattr(plugin, "explain", None)
        if explain is not None and status.code is Code.SUCCESS and len(snapshot.nodes):
            positions = np.flatnonzero(snapshot.mask()).astype(np.int64)
            answer = explain(state, pod, snapshot, positions)
            out.append(None if answer is None else (
                answer[0].tolist(), [answer[1][i] if i >= 0 else i
                                     for i in answer[0].tolist()]))
    return out


class DerivedMachine(SchedulerMachine):
    @invariant()
    def derived_arrays_match_a_fresh_computation(self) -> None:
        if not hasattr(self, "cluster"):
            return
        scheduler = self.scheduler
        scheduler.cache.update_snapshot(scheduler.snapshot)
        framework, snapshot = scheduler.framework, scheduler.snapshot
        for obj in self.cluster.list("pods").items[-4:]:
            pod = parse(obj, self.config)
            live = _answers(framework, pod, snapshot, self.clock.now)
            swapped = [s for p in framework.plugins for s in _fresh_memos(p)]
            try:
                fresh = _answers(framework, pod, snapshot, self.clock.now)
            finally:
                for owner, attr, memo in swapped:
                    setattr(owner, attr, memo)
            assert live == fresh


DerivedMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_derived_arrays_agree_with_fresh_ones = DerivedMachine.TestCase
