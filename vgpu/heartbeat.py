"""When a node's GPU inventory is fresh enough to schedule onto.

The node agent rewrites ``vgpu.io/node-heartbeat`` every ``heartbeatSeconds``; a node
whose heartbeat is older than ``nodeHeartbeatExpirySeconds`` (its agent is gone, or cannot
reach the API server) takes no new GPU pod, and ``vgpu inspect`` shows it stale. This is
the one definition: a column of heartbeats compared with :func:`oldest_fresh` gives the
same answer as :func:`fresh` node by node.
"""

from __future__ import annotations


def oldest_fresh(now: float, expiry: float) -> float:
    """The oldest heartbeat (epoch seconds) that is still fresh at ``now``."""
    return now - expiry


def fresh(heartbeat: float | None, now: float, expiry: float) -> bool:
    """Whether a heartbeat (epoch seconds; None: the node publishes none) is fresh."""
    return heartbeat is not None and heartbeat >= oldest_fresh(now, expiry)
