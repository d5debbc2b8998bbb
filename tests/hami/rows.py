"""One row of HAMi's own unit-test tables, transcribed (inputs and HAMi's expectation) and
run through vgpu: it agrees, or it is a documented difference whose reason is written
here and in docs/hami-migration.md#what-differs.

The tables come from Project-HAMi/HAMi at 4707fb0 (2026-08-21); each row names the Go
test and case it was taken from. Only inputs and expected outcomes are taken; the code
that runs them is vgpu's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

HAMI_COMMIT = "4707fb02c91c545bc7343ce26dba4c32919f9a3e"


@dataclass(frozen=True)
class Row:
    #: ``file: Test/case`` in HAMi's tree.
    source: str
    #: What vgpu does with the row's input, in the terms of HAMi's expectation.
    run: Callable[[], Any]
    #: HAMi's expected outcome.
    hami: Any
    #: Why vgpu deliberately does otherwise (None: it agrees).
    differs: str | None = None
    #: vgpu's outcome where it differs (checked, so the difference stays the one written).
    vgpu: Any = None

    def check(self) -> None:
        got = self.run()
        if self.differs is None:
            assert got == self.hami, f"{self.source}: vgpu gives {got!r}, HAMi {self.hami!r}"
        else:
            assert got == self.vgpu, f"{self.source}: vgpu gives {got!r}, documented " \
                f"{self.vgpu!r} ({self.differs})"
            assert got != self.hami, f"{self.source}: now agrees with HAMi; drop the note"


def counts(rows: Iterable[Row]) -> dict[str, int]:
    """rows, agree, documented differences."""
    listed = list(rows)
    differ = sum(r.differs is not None for r in listed)
    return {"rows": len(listed), "agree": len(listed) - differ, "differ": differ}
