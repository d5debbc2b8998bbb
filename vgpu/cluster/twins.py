"""Two replicas under one holder identity (issue 50, case 3).

A Lease tells its holders apart by ``holderIdentity`` alone: two replicas started with the
same ``--identity`` both read the Lease as their own, both renew it, and both lead, with
no wait and no transition. Two rules close that:

- the identity a replica writes carries a nonce made per process (:func:`holder_identity`,
  as kube-scheduler appends a UUID to its host name), so two processes never share one,
  whatever they were started with;
- a replica remembers the resourceVersion of its own last write of the Lease
  (:class:`TwinWatch`): reading the Lease at its next renewal, held under its identity but
  at another version, means someone else wrote it as this replica (a process cloned with
  its memory: a restored VM snapshot, a checkpointed container), and the replica must
  step down and exit (:class:`TwinError`). Before its first write a replica holds nothing
  against the Lease: a record under its name is then an earlier process's, which it takes
  over only after the takeover wait (:mod:`vgpu.cluster.leader`). A write whose answer
  was lost may have landed: until the next write's answer, the version read is not held
  against anyone.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from vgpu import meta
from vgpu.errors import VgpuError

#: Between the identity a replica was given and its per-process nonce.
SEPARATOR = "_"


def holder_identity(identity: str, nonce: str | None = None) -> str:
    """``identity`` made unique to this process (``nonce``: a fresh one if None)."""
    return f"{identity}{SEPARATOR}{nonce or uuid.uuid4().hex[:10]}"


def given_identity(holder: str) -> str:
    """The identity a replica was given, from the holder identity it wrote (the nonce
    holds no ``_``)."""
    return holder.rpartition(SEPARATOR)[0] or holder


class TwinError(VgpuError):
    """The Lease was renewed under this replica's identity by a write not its own."""


class TwinWatch:
    """What this replica last wrote to its Lease; thread-safe."""

    def __init__(self, holder: str) -> None:
        self._holder = holder
        self._lock = threading.Lock()
        self._written: str | None = None
        #: A write went out with no answer: it may have landed.
        self._unsure = False

    def sending(self) -> None:
        """A write of the Lease is about to go out."""
        with self._lock:
            self._unsure = True

    def wrote(self, lease: dict[str, Any] | None) -> None:
        """The write was answered with ``lease`` (the Lease as stored)."""
        version = meta.resource_version(lease) if lease else ""
        with self._lock:
            self._written = version or None
            self._unsure = not version

    def refused(self) -> None:
        """The write was refused (a conflict): it did not land."""
        with self._lock:
            self._unsure = False

    def check(self, lease: dict[str, Any]) -> None:
        """Raise :class:`TwinError` when ``lease``, just read, is held under this replica's
        identity at a version this replica did not write."""
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self._holder:
            return
        version = meta.resource_version(lease)
        with self._lock:
            if self._unsure:
                return
            ours = self._written
        if ours is None:
            # Before its first write a replica cannot tell a twin from an earlier process
            # that held the Lease under its name (a restart with a given nonce, or an
            # elector given a plain identity): the leader's takeover wait covers that one.
            return
        if version != ours:
            raise TwinError(
                f"the Lease is held as {self._holder!r} at resourceVersion {version}, which "
                f"this replica did not write (its last write: "
                f"{ours or 'none'}): another process renews it under the same identity")
