"""The pod's ``bind-phase`` patch: it must land but must not hold up the kubelet, nor
another pod's.

Allocate answers the kubelet at once and leaves the patch to this writer, which retries
through API hiccups and conflicts. (The node's inventory and heartbeat have their own
writer, :class:`vgpu_nodeagent.devices.inventory.InventoryPublisher`.) Each pod has a queue
of its own (:mod:`.phase_queue`): a pod whose write keeps failing backs off alone, capped,
and is tried again for as long as it lives, while the others' writes go out as they come
(issue 50: one serial queue held a served pod's record back behind another's for minutes,
and gave that other up after 30 tries). A write pending longer than
``nodeagent.phasePendingWarnSeconds`` is reported once (``on_overdue``: a log line, a
Warning event, a metric). Meanwhile the pod stays ``allocating`` with its Binding's
assignment, which the scheduler counts, so its room is never handed out again.

The patch goes through the pod's ``status`` subresource, which stores annotations as the
pod itself does: vgpu's validating webhook is registered for ``pods`` only (every pod
write outside ``status`` passes it where the API server has no matchConditions, 1.20 to
1.27), so the agent's one write per GPU pod never waits on it; the ValidatingAdmissionPolicy
(1.30+) checks status writes in the API server, and allows the agent's.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from vgpu import logs, loops, meta
from vgpu.annotations import BIND_PHASE, BIND_REASON
from vgpu.cluster.port import ClusterPort
from vgpu.errors import ClusterError, ConflictError, NotFoundError
from vgpu_nodeagent.allocation.phase_queue import Overdue, PendingWrites, PhaseUpdate

# The name from when both writers shared a module: log queries keep matching.
_log = logs.get("vgpu.nodeagent.writer")

__all__ = ["WORKERS", "Outcome", "PhaseUpdate", "PhaseWriter"]

#: Attempts in flight at once, each for another pod: as many as a node serves pods at
#: once in practice, so that requests that hang until their timeout hold up no other pod.
WORKERS = 64


class Outcome(enum.Enum):
    WRITTEN = "written"
    #: The pod is gone, or another pod has its name: nothing more to write for it.
    GONE = "gone"
    FAILED = "failed"


class PhaseWriter:
    """Patches pods' ``bind-phase`` (and ``bind-reason``, the served record), one queue per
    pod, retrying failures with a capped back-off until the pod is gone."""

    def __init__(self, port: ClusterPort, *, max_backoff: float = 5.0,
                 pending_warn: float = 60.0, workers: int = WORKERS,
                 clock: Callable[[], float] = time.monotonic,
                 on_overdue: Callable[[Overdue], None] | None = None) -> None:
        self._port = port
        self._pending = PendingWrites(max_backoff)
        self._bound = pending_warn
        self._workers = workers
        self._clock = clock
        self._on_overdue = on_overdue
        self._cond = threading.Condition()

    def submit(self, update: PhaseUpdate) -> None:
        with self._cond:
            self._pending.add(update, self._clock())
            self._cond.notify_all()

    def forget(self, uid: str) -> None:
        """The pod of this uid is gone (the pod watch says): nothing more for it."""
        with self._cond:
            self._pending.gone(uid)
            self._cond.notify_all()

    def counts(self) -> tuple[int, int]:
        """Pods with a write still to go, and how many of them wait past the bound."""
        with self._cond:
            return self._pending.counts(self._clock(), self._bound)

    def wait_idle(self, timeout: float) -> bool:
        """True once every submitted update was written or its pod is gone (for tests and
        exit)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending, timeout)

    def attempt(self, update: PhaseUpdate) -> tuple[Outcome, str]:
        """One try at the patch: what came of it, and the error when it failed."""
        annotations: Mapping[str, str | None] = {BIND_PHASE: update.phase,
                                                  BIND_REASON: update.reason, **update.extra}
        try:
            self._port.patch_annotations("pods", update.name, annotations,
                                         namespace=update.namespace, uid=update.uid,
                                         status=True, conditions=update.conditions)
        except NotFoundError:
            _log.info("pod gone before its bind phase was written", pod=update.pod)
            return Outcome.GONE, ""
        except ClusterError as exc:
            if isinstance(exc, ConflictError) and self._replaced(update):
                # The phase was this pod's; a pod that took its name gets none of it.
                _log.info("pod replaced before its bind phase was written", pod=update.pod,
                          uid=update.uid)
                return Outcome.GONE, ""
            return Outcome.FAILED, str(exc)
        _log.info("pod bind phase written", pod=update.pod, phase=update.phase,
                  reason=update.reason)
        return Outcome.WRITTEN, ""

    def _replaced(self, update: PhaseUpdate) -> bool:
        """Whether the pod of ``update`` is gone or another pod has its name now (what a
        conflict on a patch that names the uid means)."""
        if not update.uid:
            return False
        try:
            pod = self._port.get("pods", update.name, update.namespace)
        except NotFoundError:
            return True
        except ClusterError:
            return False  # cannot tell: try again
        return meta.uid(pod) != update.uid

    def _one(self, key: str, update: PhaseUpdate) -> None:
        """One attempt for one pod, on a worker; its outcome goes back to the queue."""
        outcome, error = Outcome.FAILED, "the attempt raised (logged)"
        try:
            outcome, error = self.attempt(update)
        except Exception:  # a bug in one update must not end every later pod's phase
            _log.exception("writing bind phase raised", pod=update.pod)
            loops.record("bind-phase-writer")
        with self._cond:
            now = self._clock()
            if outcome is Outcome.WRITTEN:
                self._pending.written(key, now)
            elif outcome is Outcome.GONE:
                self._pending.gone(key)
            else:
                wait = self._pending.failed(key, now, error)
                _log.warning("writing bind phase failed, retrying", pod=update.pod,
                             phase=update.phase, error=error, retry_in=round(wait, 3))
            self._cond.notify_all()

    def run(self, stop: threading.Event) -> None:
        """Send each pod's due attempts on the workers until ``stop``."""
        pool = ThreadPoolExecutor(self._workers, thread_name_prefix="bind-phase")
        try:
            while not stop.is_set():
                with self._cond:
                    now = self._clock()
                    due = self._pending.take_due(now)
                    late = self._pending.overdue(now, self._bound)
                    if not due and not late:
                        upcoming = self._pending.next_due()
                        wait = 0.5 if upcoming is None else min(max(upcoming - now, 0.0), 0.5)
                        self._cond.wait(wait)
                        continue
                for key, update in due:
                    pool.submit(self._one, key, update)
                for overdue in late:
                    self._report(overdue)
        finally:
            # An attempt in flight may wait for its request's timeout: the agent stops
            # without it (a restarted agent writes what its progress file says it served).
            pool.shutdown(wait=False, cancel_futures=True)

    def _report(self, overdue: Overdue) -> None:
        update = overdue.update
        _log.error("bind phase still not written; still trying", pod=update.pod,
                   phase=update.phase, waited_seconds=round(overdue.waited),
                   attempts=overdue.attempts, error=overdue.last_error)
        told = self._on_overdue
        if told is not None:
            loops.survive("bind-phase-writer", lambda: told(overdue))
