"""The failure diagnosis reuses what filters answered for unchanged nodes, except filters
whose answer depends on other nodes (``diagnosis_memo = False``), which run every time;
each node still reports the first failing filter in profile order."""

from __future__ import annotations

from collections import Counter

from tests.scheduler.affinity_support import node_obj, pod, snapshot_of
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.diagnosis import Diagnoser
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.status import SUCCESS, Code, Status, unschedulable

CALLS: Counter[str] = Counter()


class Fails:
    def __init__(self, name: str, node: str, memo: bool = True) -> None:
        self.name, self.node = name, node
        self.diagnosis_memo = memo

    def filter(self, state: CycleState, pod: object, node: NodeInfo) -> Status:
        CALLS[self.name] += 1
        return unschedulable(f"{self.name} says no") if node.name == self.node else SUCCESS

    def columns(self) -> tuple[()]:
        return ()


def test_live_filters_run_each_time_and_the_first_failure_wins() -> None:
    filters = [Fails("A", "x"), Fails("L", "y", memo=False), Fails("B", "z"),
               Fails("L2", "z", memo=False)]
    snap = snapshot_of(filters[0], [node_obj(n) for n in ("x", "y", "z", "w")])
    diagnoser = Diagnoser(set())
    incoming = pod("p")
    for attempt in (1, 2):
        CALLS.clear()
        statuses: dict[str, Status] = {}
        diagnoser.diagnose(CycleState(1000.0 + attempt, snap), incoming, snap, statuses, filters)
        assert {n: (s.plugin, s.code) for n, s in statuses.items()} == {
            "x": ("A", Code.UNSCHEDULABLE), "y": ("L", Code.UNSCHEDULABLE),
            "z": ("B", Code.UNSCHEDULABLE), "w": ("", Code.ERROR)}
        if attempt == 1:
            assert CALLS == {"A": 4, "B": 3, "L": 3, "L2": 1}
        else:  # A and B from the memo; the live ones again, only where they come first
            assert CALLS == {"L": 3, "L2": 1}
