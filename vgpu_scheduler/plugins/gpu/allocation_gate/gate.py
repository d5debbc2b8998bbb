"""The Permit gate's per-node state: the GPU pods in flight and those waiting behind them.

Free of framework types so it can be tested on its own. ``conflicts(a, b)`` says whether
two assignments may not be in flight on one node together (:func:`vgpu.confusable.confusable`,
or always, for the one-pod-per-node mode). Waiters are let through first come first served:
a pod waits behind any earlier waiter it conflicts with, so one that conflicts with nothing
in flight still cannot overtake a conflicting one forever.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from vgpu import confusable, logs
from vgpu.codecs import Assignment

_log = logs.get("vgpu.scheduler.gate")

Conflicts = confusable.Conflicts

_NOTHING: tuple[list[Assignment | None], confusable.OneGpuGrants | None] = ([], {})


@dataclass(frozen=True)
class _Held:
    since: float
    assignment: Assignment | None


class Gate:
    def __init__(self, timeout: float, conflicts: Conflicts = lambda a, b: True) -> None:
        self.timeout = timeout
        self._conflicts = conflicts
        self._lock = threading.RLock()
        self._holders: dict[str, dict[str, _Held]] = {}
        self._waiting: dict[str, list[tuple[str, Assignment | None]]] = {}
        self._where: dict[str, str] = {}
        # Where each holder holds: leave() and hold() scanned every node with a pod in
        # flight, hundreds in a burst (yappi: 6 % of the scheduler's CPU).
        self._held_at: dict[str, str] = {}
        # Per node, what in_flight_view answered until the node's holders or waiters change:
        # the filters ask it of ten nodes per pod in a burst, mostly unchanged since.
        self._views: dict[str, tuple[list[Assignment | None], confusable.OneGpuGrants | None]] = {}

    def _add_holder(self, node: str, key: str, held: _Held) -> None:
        """A pod is in flight on one node at most."""
        other = self._held_at.get(key)
        if other is not None and other != node:
            self._drop_holder(other, key)
        self._holders.setdefault(node, {})[key] = held
        self._held_at[key] = node
        self._views.pop(node, None)

    def _drop_holder(self, node: str, key: str) -> bool:
        holders = self._holders.get(node)
        if holders is None or holders.pop(key, None) is None:
            return False
        self._views.pop(node, None)
        if self._held_at.get(key) == node:
            del self._held_at[key]
        if not holders:
            del self._holders[node]
        return True

    def holders(self, node: str) -> dict[str, float]:
        with self._lock:
            return {key: held.since for key, held in self._holders.get(node, {}).items()}

    def waiting(self, node: str) -> list[str]:
        with self._lock:
            return [key for key, _ in self._waiting.get(node, ())]

    def _expire(self, node: str, now: float) -> dict[str, _Held]:
        for key, held in list(self._holders.get(node, {}).items()):
            if now - held.since >= self.timeout:
                _log.warning("in-flight GPU pod timed out; opening the node's gate",
                             node=node, pod=key, seconds=round(now - held.since, 1))
                self._drop_holder(node, key)
        return self._holders.get(node, {})

    def _clear(self, node: str, assignment: Assignment | None,
               ahead: list[tuple[str, Assignment | None]]) -> bool:
        """No pod in flight on ``node`` nor waiting ``ahead`` conflicts with ``assignment``."""
        holders = self._holders.get(node, {})
        return (not any(self._conflicts(assignment, h.assignment) for h in holders.values())
                and not any(self._conflicts(assignment, a) for _, a in ahead))

    def is_open(self, node: str, now: float) -> bool:
        """Nothing in flight on the node (after the timeouts)."""
        with self._lock:
            return not self._expire(node, now)

    def enter(self, key: str, node: str, now: float,
              assignment: Assignment | None = None) -> bool:
        """True: the pod is in flight now. False: it waits behind a conflicting pod."""
        with self._lock:
            self._expire(node, now)
            queue = self._waiting.get(node, [])
            if self._clear(node, assignment, queue):
                self._add_holder(node, key, _Held(now, assignment))
                return True
            if self._where.get(key) != node:
                self._waiting.setdefault(node, []).append((key, assignment))
                self._where[key] = node
                self._views.pop(node, None)
            return False

    def hold(self, key: str, node: str, since: float,
             assignment: Assignment | None = None) -> None:
        """A pod seen in ``allocating`` (after a restart, or bound by another replica).

        If the gate had let it through on another node (its Binding lost a race to
        another binder), that node's hold is released: the pod is not in flight there.
        """
        with self._lock:
            held = self._holders.get(node, {}).get(key)
            self._add_holder(node, key, _Held(
                since if held is None else held.since,
                assignment if held is None or held.assignment is None else held.assignment))

    def leave(self, key: str) -> str | None:
        """The pod no longer holds or waits for any gate; returns the node it was at."""
        with self._lock:
            found = self._held_at.get(key)
            if found is not None:
                self._drop_holder(found, key)
            waited = self._where.pop(key, None)
            if waited is not None:
                self._views.pop(waited, None)
                queue = [entry for entry in self._waiting.get(waited, []) if entry[0] != key]
                if queue:
                    self._waiting[waited] = queue
                else:
                    self._waiting.pop(waited, None)
                found = found or waited
            return found

    def advance(self, node: str, now: float) -> list[str]:
        """Let through, in order, every waiter that no longer conflicts with a pod in
        flight or an earlier waiter; returns them."""
        with self._lock:
            queue = self._waiting.get(node)
            if not queue:
                return []
            self._expire(node, now)
            through: list[str] = []
            kept: list[tuple[str, Assignment | None]] = []
            for key, assignment in queue:
                if self._clear(node, assignment, kept):
                    self._add_holder(node, key, _Held(now, assignment))
                    self._where.pop(key, None)
                    through.append(key)
                else:
                    kept.append((key, assignment))
            if kept:
                self._waiting[node] = kept
            else:
                del self._waiting[node]
            self._views.pop(node, None)
            return through

    def in_flight_view(self, node: str) -> tuple[list[Assignment | None],
                                                  confusable.OneGpuGrants | None]:
        """The assignments of the pods in flight or waiting on ``node``, and their
        :func:`vgpu.confusable.one_gpu_grants` (callers must not change them)."""
        with self._lock:
            view = self._views.get(node)
            if view is None:
                if node not in self._holders and node not in self._waiting:
                    return _NOTHING
                out = [h.assignment for h in self._holders.get(node, {}).values()]
                out.extend(a for _, a in self._waiting.get(node, ()))
                view = self._views[node] = (out, confusable.one_gpu_grants(node, out))
            return view

    def any_in_flight(self) -> bool:
        with self._lock:
            return bool(self._holders or self._waiting)

    def blocked(self, grants: Iterable[Assignment],
                in_flight: Iterable[Assignment | None]) -> bool:
        """Would a pod given one of ``grants`` wait behind ``in_flight`` on some of them?"""
        others = list(in_flight)
        return any(self._conflicts(grant, other) for grant in grants for other in others)

    def nodes_with_waiters(self) -> list[str]:
        with self._lock:
            return list(self._waiting)
