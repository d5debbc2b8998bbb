"""The built-in plugins, one module each; ``scheduler.plugins.registry`` names them."""

from __future__ import annotations
