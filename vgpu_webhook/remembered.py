"""The GPU types the webhook has seen, kept where they outlive their nodes and the webhook.

A GPU node pool scaled to zero takes its inventories with it; a GPU pod created then still
has to be charged its memory percentage against the largest GPU it may land on
(docs/quotas.md#gpu-pods-before-their-nodes). So the webhook writes every (model, MiB)
pair a node inventory showed into the ConfigMap ``vgpu-gpu-types`` of its own namespace,
and reads it back at start and as it changes (replicas share it): the charge then uses
those types when no node of them is up. The set only grows: a type gone for good stays
(its pods are over-charged, never under-charged); delete the ConfigMap to forget.

``data``: one key per type, ``<model>`` → ``<MiB>`` of its largest size seen (the model
with characters a ConfigMap key cannot hold replaced by ``_``, the model itself in the
value: ``"<MiB> <model>"``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from vgpu import limits, logs, loops, meta
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort, Selector
from vgpu.errors import ClusterError, ConflictError, NotFoundError

log = logs.get("vgpu.webhook.remembered")

NAME = "vgpu-gpu-types"
#: The writer's name in vgpu_webhook_loop_errors_total.
LOOP = "gpu types writer"
_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")

Kinds = frozenset[tuple[str, int]]


def decode(obj: Mapping[str, Any] | None) -> Kinds:
    """The (model, MiB) pairs a ConfigMap holds; entries that do not read are skipped."""
    data = meta.mapping(obj.get("data")) if obj is not None else {}
    out = set()
    for value in data.values():
        mib, _, model = str(value).partition(" ")
        if mib.isdigit() and model and 1 <= int(mib) <= limits.GPU_MEMORY_MIB:
            out.add((model, int(mib)))
    return frozenset(out)


def _key(model: str, mib: int) -> str:
    return f"{_KEY_CHARS.sub('_', model)[:200]}.{mib}"


def encode(kinds: Iterable[tuple[str, int]]) -> dict[str, str]:
    return {_key(model, mib): f"{mib} {model}" for model, mib in sorted(kinds)}


class RememberedTypes:
    """Reads the ConfigMap (a watch) and adds the types it lacks (read, merge, write;
    a conflict reads again). Thread-safe; :meth:`learn` never blocks on the API."""

    def __init__(self, port: ClusterPort, namespace: str, retry: float = 5.0) -> None:
        self._port = port
        self._namespace = namespace
        # After a failed write, the wait before the next (doubling, at most 5 minutes): a
        # missing namespace or right must not become a loop of requests.
        self._retry = retry
        self._failed = False
        self._lock = threading.Lock()
        self._known: Kinds = frozenset()
        self._pending: Kinds = frozenset()
        self._wake = threading.Event()
        self.on_change: Any = None

    @property
    def known(self) -> Kinds:
        return self._known

    def handle(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """Informer handler for the ConfigMaps of the namespace."""
        obj = new if new is not None else old
        if obj is None or meta.name(obj) != NAME:
            return
        with self._lock:
            self._known = decode(new) if new is not None else frozenset()
            known = self._known
        if self.on_change is not None:
            self.on_change(known)

    def learn(self, kinds: Kinds) -> None:
        """Types the inventories show now: written later, by :meth:`run`, when new."""
        with self._lock:
            if kinds <= self._known | self._pending:
                return
            self._pending = self._pending | kinds
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        """Write the types learnt, until ``stop``; a failed round is logged, counted
        (vgpu.loops) and tried again after a back-off."""
        failures = 0
        while not stop.is_set():
            self._wake.wait(timeout=5.0)
            self._wake.clear()
            if loops.survive(LOOP, self._round) and not self._failed:
                failures = 0
                continue
            failures += 1
            if stop.wait(min(self._retry * 2 ** min(failures - 1, 16), 300.0)):
                return
            self._wake.set()

    def _round(self) -> None:
        self._failed = False
        with self._lock:
            pending = self._pending - self._known
        if not pending:
            return
        try:
            self._write(pending)
        except ClusterError as exc:
            log.warning("could not remember GPU types; trying again", error=str(exc))
            self._failed = True
            return
        with self._lock:
            self._pending -= pending

    def _write(self, kinds: Kinds) -> None:
        for _ in range(5):
            try:
                current = self._port.get("configmaps", NAME, self._namespace)
            except NotFoundError:
                body = {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": NAME, "namespace": self._namespace},
                        "data": encode(kinds)}
                try:
                    self._port.create("configmaps", body)
                    return
                except ConflictError:
                    continue
            merged = decode(current) | kinds
            if merged == decode(current):
                return
            updated = {**current, "data": encode(merged)}
            try:
                self._port.replace("configmaps", updated)
                return
            except ConflictError:
                continue
        raise ConflictError(f"configmap {NAME}: kept changing under five writes")


def start(port: ClusterPort, namespace: str, stop: threading.Event) -> RememberedTypes:
    """The store, its watch and its writer, running until ``stop``."""
    store = RememberedTypes(port, namespace)
    informer = Informer(port, "configmaps", selector=Selector(namespace=namespace))
    informer.add_handler(store.handle)
    informer.start(stop, name="webhook-gpu-types")
    loops.thread(LOOP, lambda: store.run(stop)).start()
    return store
