"""The kube-scheduler style one-line answer to "why is my pod pending"; the framework
writes it (a PostFilter plugin words its own part the same way)."""

from __future__ import annotations

from vgpu_scheduler.framework.diagnosis import summarize

__all__ = ["summarize"]
