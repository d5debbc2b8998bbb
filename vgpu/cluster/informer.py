"""List + watch over the cluster port, keeping a local cache and calling handlers.

One implementation for every component and both adapters (client-go's reflector and
informer in miniature): list, then watch from the list's resourceVersion; resume from the
last version seen after a watch ends; re-list on ``GoneError`` and reconcile the cache
(synthesising the adds, updates and deletes the gap hid); reconnect with capped
exponential backoff on other errors. An event whose object carries the resourceVersion
already cached is skipped, so a re-list never double-applies an event.

Objects are cached by namespace/name, but an object is its uid: one deleted and created
again under its name while the watch was away (a StatefulSet's pod) comes back from the
re-list as another object, so the handlers hear a delete of the old one and an add of the
new one, never an update from one to the other (issue 50; client-go's ``Replace`` reports
it as an update, and kube-scheduler's ``updatePodInCache`` splits it again). Handlers that
other code also feeds can split such updates themselves with :func:`by_uid`.

It can run in a thread (:meth:`run`) or be pumped synchronously (:meth:`pump` with a zero
timeout), which is how the simulator and deterministic tests drive it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vgpu import logs, loops
from vgpu.cluster.port import ALL, ClusterPort, Kind, Obj, Selector, key_of
from vgpu.errors import ClusterError, GoneError
from vgpu.meta import resource_version, uid

Handler = Callable[[Obj | None, Obj | None], None]
"""Called as ``handler(old, new)``: add is ``(None, new)``, delete is ``(old, None)``."""


def replaced(old: Obj | None, new: Obj | None) -> bool:
    """Whether ``new`` is another object than ``old`` under the same name: both carry a
    uid and they differ (an object without one, a test's, is told by its name)."""
    if old is None or new is None:
        return False
    before, after = uid(old), uid(new)
    return bool(before and after and before != after)


def by_uid(handler: Handler) -> Handler:
    """``handler``, told an update whose uid changed as the delete of the old object
    followed by the add of the new one."""

    def split(old: Obj | None, new: Obj | None) -> None:
        if replaced(old, new):
            handler(old, None)
            handler(None, new)
        else:
            handler(old, new)

    return split

_log = logs.get("vgpu.informer")

#: Unexpected failures in a row after which a watch loop gives up (and its thread ends).
GIVE_UP = 20


class Informer:
    def __init__(self, port: ClusterPort, kind: Kind, handler: Handler | None = None,
                 selector: Selector = ALL, *, watch_timeout: float = 30.0,
                 max_backoff: float = 10.0) -> None:
        self.port = port
        self.kind = kind
        self.selector = selector
        self._handlers: list[Handler] = [handler] if handler else []
        self._cache: dict[str, Obj] = {}
        self._rv = ""
        self._watch_timeout = watch_timeout
        self._max_backoff = max_backoff
        self.synced = threading.Event()
        self._lock = threading.RLock()
        self._relisted: list[Callable[[], object]] = []

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def on_relist(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` after each list but the first has been applied (a watch that
        expired, or a round that failed), outside the informer's lock."""
        self._relisted.append(callback)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """No event is applied inside: what :meth:`get` reads there stays what the
        handlers were last told, until the block ends."""
        with self._lock:
            yield

    @property
    def watch_timeout(self) -> float:
        """Server-side timeout of one watch request (the loop then resumes)."""
        return self._watch_timeout

    @watch_timeout.setter
    def watch_timeout(self, seconds: float) -> None:
        self._watch_timeout = seconds

    # -- cache -----------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._cache.get(key)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._cache.values())

    def snapshot(self) -> dict[str, Obj]:
        """The store as it stands, by key (a copy; the objects are the store's own)."""
        with self._lock:
            return dict(self._cache)

    @property
    def resource_version(self) -> str:
        return self._rv

    def _emit(self, old: Obj | None, new: Obj | None) -> None:
        for handler in self._handlers:
            try:
                handler(old, new)
            except Exception:  # a handler's bug must not stop the watch for everyone
                _log.exception("informer handler failed", kind=self.kind)
                loops.record(f"informer handler ({self.kind})")

    # -- list and watch --------------------------------------------------------------------

    def sync(self) -> None:
        """List and reconcile the cache with what the server has now: objects gone, or
        replaced by another of their name, are deleted first; then the others are added
        or updated."""
        result = self.port.list(self.kind, self.selector)
        relist = self.synced.is_set()
        with self._lock:
            fresh = {key_of(o): o for o in result.items}
            for key, old in list(self._cache.items()):
                new = fresh.get(key)
                if new is None or replaced(old, new):
                    del self._cache[key]
                    self._emit(old, None)
            for key, new in fresh.items():
                cached = self._cache.get(key)
                if cached is not None and resource_version(cached) == resource_version(new):
                    continue
                self._cache[key] = new
                self._emit(cached, new)
            self._rv = result.resource_version
        self.synced.set()
        if relist:
            for callback in self._relisted:
                try:
                    callback()
                except Exception:  # as a handler's: the watch goes on for everyone
                    _log.exception("after-relist callback failed", kind=self.kind)
                    loops.record(f"informer relist ({self.kind})")

    def apply(self, etype: str, obj: Obj) -> None:
        key = key_of(obj)
        with self._lock:
            old = self._cache.get(key)
            if etype == "DELETED":
                if old is not None:
                    del self._cache[key]
                    self._emit(old, None)
            elif old is None or resource_version(old) != resource_version(obj):
                self._cache[key] = obj
                if replaced(old, obj):
                    # A watch shows the delete first; this is for a stream that did not.
                    self._emit(old, None)
                    self._emit(None, obj)
                else:
                    self._emit(old, obj)
            rv = resource_version(obj)
            if rv:
                self._rv = rv

    def pump(self, timeout: float = 0.0) -> int:
        """Apply the events available within ``timeout`` seconds; returns how many.

        Lists first when never synced, and re-lists when the watch answers Gone.
        """
        if not self.synced.is_set():
            self.sync()
        count = 0
        try:
            for event in self.port.watch(self.kind, self._rv, self.selector, timeout):
                self.apply(event.type, event.object)
                count += 1
        except GoneError:
            _log.info("watch expired, re-listing", kind=self.kind)
            self.sync()
        return count

    def run(self, stop: threading.Event) -> None:
        """Keep the cache current until ``stop`` is set; errors back off and retry.

        Anything else a round raises (an answer no Kubernetes API server sends) is logged,
        counted and retried with a fresh list; after :data:`GIVE_UP` such rounds in a row
        the loop raises :class:`vgpu.loops.Ended`, which ends its thread, and the
        component's ``/healthz`` reports that.
        """
        backoff = 0.2
        unexpected = 0
        while not stop.is_set():
            try:
                if not self.synced.is_set() or unexpected:
                    self.sync()
                self.pump(self._watch_timeout)
                backoff = 0.2
                unexpected = 0
            except ClusterError as exc:
                _log.warning("watch failed, retrying", kind=self.kind, error=str(exc),
                             retry_in=backoff)
            except Exception as exc:
                unexpected += 1
                _log.exception("watch round failed; listing again", kind=self.kind,
                               in_a_row=unexpected)
                loops.record(f"informer ({self.kind})")
                if unexpected >= GIVE_UP:
                    raise loops.Ended(f"the {self.kind} watch failed {unexpected} times in "
                                      f"a row") from exc
            else:
                continue
            stop.wait(backoff)
            backoff = min(backoff * 2, self._max_backoff)

    def start(self, stop: threading.Event, name: str | None = None) -> threading.Thread:
        thread = loops.thread(name or f"informer-{self.kind}", lambda: self.run(stop))
        thread.start()
        return thread


def wait_synced(informers: list[Informer], timeout: float | None = None) -> bool:
    return all(i.synced.wait(timeout) for i in informers)


__all__ = ["Handler", "Informer", "by_uid", "replaced", "wait_synced"]
