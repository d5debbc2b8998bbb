"""The built-in plugins, one module each; ``scheduler.registry`` names them."""

from __future__ import annotations
