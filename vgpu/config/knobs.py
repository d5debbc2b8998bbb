"""How a setting is declared: its default, bounds or choices, and a one-line doc in the
field's metadata, which :mod:`vgpu.config.loading` checks values against and
``vgpu config defaults --explain`` prints."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def knob(default: Any, doc: str, *, lo: float | None = None, hi: float | None = None,
         choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"doc": doc, "lo": lo, "hi": hi, "choices": choices})


def section(factory: Any, doc: str) -> Any:
    return field(default_factory=factory, metadata={"doc": doc})
