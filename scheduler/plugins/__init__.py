"""The built-in plugins, one module each; ``vgpu_scheduler.plugins.registry`` names them."""

from __future__ import annotations
