"""webhook component of vgpu."""

from __future__ import annotations
