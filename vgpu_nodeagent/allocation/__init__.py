"""Allocate and GetPreferredAllocation without the gRPC around them: the in-flight pods
from the local watch, which container a request is for, the progress kept across
restarts, and the ``bind-phase`` writer.
"""

from __future__ import annotations
