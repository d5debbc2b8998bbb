"""The cluster port over a real API server, with the official ``kubernetes`` client.

This is the only part of the core that does network I/O; the pure modules never import it.
"""

from __future__ import annotations
