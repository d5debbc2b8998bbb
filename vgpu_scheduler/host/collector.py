"""The cyclic garbage collector around the scheduler's initial list.

A cold start allocates millions of container objects (the decoded pods and nodes, their
parses, the cache's records) that all live on. The collector's thresholds make it pass
over them again and again while they pile up: at 15,000 nodes and 150,000 bound pods its
full passes were a third of the cold start (bench/scheduling.py --nodes), and they find
nothing (decoded JSON holds no cycle). So the collector waits while the first list is
applied (the stepping ``pump``), or while the informers' threads list (``Scheduler.run``,
for as long as the sync takes up to its timeout); what the pump built goes straight to the
oldest generation, where the next full pass the collector schedules still sees it, and
``Scheduler.run`` freezes what was listed once synced. Reference counting frees everything
else as before.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: The longest a sync keeps the collector paused, whatever its warning timeout (none
#: included): cyclic garbage must not pile up behind an API server that never answers.
LONGEST_PAUSE_SECONDS = 60.0


@contextmanager
def paused() -> Iterator[Callable[[], None]]:
    """Collect no cycles inside, or until the callable given is called (a wait that runs
    long: objects that are garbage in cycles must not pile up for good); the collector is
    restored as it was on the way out."""
    was_enabled = gc.isenabled()
    resumed = False

    def resume() -> None:
        nonlocal resumed
        if was_enabled and not resumed:
            resumed = True
            gc.enable()

    gc.disable()
    try:
        yield resume
    finally:
        resume()


def promote() -> None:
    """Move every object the collector tracks to its oldest generation without a pass
    (what surviving two passes would do), unless something was frozen (``gc.freeze``):
    moving it back would undo that."""
    if gc.get_freeze_count():
        return
    gc.freeze()
    gc.unfreeze()


@contextmanager
def initial_list() -> Iterator[None]:
    """Around applying the informers' first lists (the stepping ``pump``)."""
    with paused():
        yield
        promote()
