"""The outcome of an extension point: a code and the reasons behind it.

Normal outcomes (a node does not fit, a pod must wait) are values, never exceptions; an
exception escaping a plugin is a bug and the framework turns it into an ``ERROR`` status.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Code(enum.IntEnum):
    SUCCESS = 0
    #: A transient failure (an API call failed): the pod is retried after a backoff.
    ERROR = 1
    #: This node does not fit now; a cluster change may help.
    UNSCHEDULABLE = 2
    #: This node cannot fit the pod whatever happens on it; preemption would not help either.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    #: Permit only: hold the pod until a plugin allows or rejects it.
    WAIT = 4
    #: PreFilter/PreScore: this plugin has nothing to do for this pod; Bind: not my pod.
    SKIP = 5
    #: Bind only: the pod is bound already (by another replica, or by an earlier try whose
    #: answer was lost) or being deleted; the watch will show what is true, nothing to retry.
    CONFLICT = 6
    #: Bind only: the Binding went out and no answer says what became of it (the connection
    #: ended or timed out after it was written, or the server answered 5xx): it may still
    #: be carried out (issue 36).
    IN_DOUBT = 7


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    #: The plugin that returned it; the framework fills it in for failures.
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    def __str__(self) -> str:
        head = self.code.name
        return f"{head}: {self.message}" if self.reasons else head


SUCCESS = Status()
SKIP = Status(Code.SKIP)
WAIT = Status(Code.WAIT)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(*reasons: str) -> Status:
    return Status(Code.ERROR, reasons)


def conflict(*reasons: str) -> Status:
    return Status(Code.CONFLICT, reasons)


def in_doubt(*reasons: str) -> Status:
    return Status(Code.IN_DOUBT, reasons)
