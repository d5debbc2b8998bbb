"""A write's deadline as the API server reads it (issue 46).

Every write the scheduler sends is given up by a deadline, by the client (the transport
neither sends it after the deadline nor waits for its answer past it) and by the API
server, which reads a ``timeout`` query parameter on writes: kube-apiserver 1.20 on
create, update, patch and delete (a bad value there is logged and 34 s used), current
releases on every request that is not long-running, from when it was received, capped at
``--request-timeout`` (60 s; a bad value there is a 400). Past it the server cancels the
request's context and answers 504, so a write still waiting for admission or storage is
given up rather than applied late.
"""

from __future__ import annotations

import math
import time


def server_timeout(seconds: float) -> str:
    """The ``timeout`` query parameter for ``seconds`` left: a Go duration
    (``time.ParseDuration``) in whole milliseconds, rounded down so that the server gives
    up no later than the client, and at least 1 ms (0 means no timeout to a current API
    server, and an expired deadline must never become that)."""
    return f"{max(1, math.floor(seconds * 1000))}ms"


def with_timeout(query: list[tuple[str, str]], deadline: float) -> list[tuple[str, str]]:
    """``query`` and the ``timeout`` of a write due by ``deadline`` (``time.monotonic``)."""
    return [*query, ("timeout", server_timeout(deadline - time.monotonic()))]
