"""The isolation backend a node runs now: the configured mode, and what it falls back to.

The configured mode is the cluster's ``isolation.mode``, or the node's ``vgpu.io/isolation``
label (:func:`vgpu.isolation_modes.resolve_mode`). What actually runs can be less:

- ``hami-core`` without ``nodeagent.hamiCorePath`` hands out HAMi-core's environment with
  nothing to read it: mode ``none``, as the inventory and ``vgpu why`` say. So does a library
  the agent refused (:mod:`vgpu_nodeagent.isolation.hami_library`), and says why (degraded).
- ``mps`` while the control daemon is down or its pipe folder is gone: containers get
  HAMi-core's answer instead (a mount of a missing folder would fail the container, and
  a client without a daemon runs unlimited anyway), and the mode says what that is.
- ``mps-hami-core`` likewise; and without a library that checked out, plain ``mps``: its
  limits hold, only CUDA reports the whole GPU as total memory (degraded).
- ``auto`` is resolved once, at start (:mod:`vgpu_nodeagent.isolation.auto`): the strongest
  mode the node supports, which then runs as if configured.

So a pod is always answered (no pod loses its allocation to an isolation fault), and the
node's inventory tells the scheduler the truth, which keeps pods that require
enforcement away until the daemon is back.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu import isolation_modes, logs, meta
from vgpu.cluster.port import ClusterPort
from vgpu.config import Config
from vgpu.config.isolation_section import check_split
from vgpu.errors import ClusterError
from vgpu.node_isolation import NodeIsolation
from vgpu.pod_history import Isolation
from vgpu_nodeagent.devices.discovery import GpuFacts
from vgpu_nodeagent.isolation import auto
from vgpu_nodeagent.isolation.grants import PRELOAD_IN_CONTAINER
from vgpu_nodeagent.isolation.hami_library import NOT_CONFIGURED, Library
from vgpu_nodeagent.isolation.mps import MpsDaemon

_log = logs.get("vgpu.nodeagent.isolation")


@dataclass(frozen=True)
class Live:
    """Which answer containers get (``backend``) and the mode that amounts to."""

    backend: str
    mode: str
    enforced: bool
    detail: str
    #: Why the configured mode is not what runs (None: it is).
    problem: str | None = None

    def record(self) -> Isolation:
        return Isolation(self.mode, self.enforced, self.detail)


def _hami(library: Library, problem: str | None = None, prefix: str = "") -> Live:
    if library.ok:
        return Live(isolation_modes.HAMI_CORE, isolation_modes.HAMI_CORE, True,
                    f"{prefix}HAMi-core environment; {library.path} preloaded through "
                    f"{PRELOAD_IN_CONTAINER} ({library.detail})", problem)
    why = (library.detail if library.path else "nodeagent.hamiCorePath is not set") + (
        ", so nothing enforces the limits unless the container's image ships HAMi-core")
    return Live(isolation_modes.HAMI_CORE, isolation_modes.NONE, False,
                f"{prefix}HAMi-core environment only (CUDA_DEVICE_MEMORY_LIMIT_<i>, "
                f"CUDA_DEVICE_SM_LIMIT): {why}", problem or library.problem)


def _without_library(config: Config) -> Config:
    return dataclasses.replace(config, nodeagent=dataclasses.replace(config.nodeagent,
                                                                     hami_core_path=""))


class Backend:
    def __init__(self, config: Config, daemon: MpsDaemon | None = None,
                 library: Library | None = None) -> None:
        self._config = config
        self.choice = isolation_modes.ModeChoice(config.isolation.mode)
        self.daemon = daemon
        #: ``isolation.mode: auto`` (or the label) chose :attr:`choice`, for this reason.
        self.auto: str | None = None
        if library is None:
            # Taken as checked: the agent gives the library it installed and checked
            # (use_library) before it serves; tests and tools build a Backend alone.
            path = config.nodeagent.hami_core_path
            library = Library(path, True, "as configured") if path else NOT_CONFIGURED
        self.library = library
        self.answers = config if library.ok else _without_library(config)

    def use_library(self, library: Library) -> None:
        """The library as installed and checked: containers get it only when ``ok``."""
        self.library = library
        self.answers = self._config if library.ok else _without_library(self._config)

    def configure(self, label: str | None,
                  facts: Sequence[GpuFacts] = ()) -> isolation_modes.ModeChoice:
        """Apply the node's label (``auto`` resolved against ``facts`` and the library);
        the MPS daemon is made here when the mode needs one."""
        choice = isolation_modes.resolve_mode(self._config.isolation.mode, label)
        self.auto = None
        if choice.mode == isolation_modes.AUTO:
            chosen, self.auto = auto.choose(self._config, facts, self.library.ok)
            choice = isolation_modes.ModeChoice(chosen, choice.error)
        if isolation_modes.uses_mps(choice.mode):
            problem = check_split(choice.mode, self._config.device_split_count,
                                  self._config.isolation.mps)
            if problem is not None:
                # The cluster default cannot be an MPS mode here: the config refuses that
                # split.
                fallback = self._config.isolation.mode
                if fallback == isolation_modes.AUTO:
                    # auto never chooses MPS past the client limit: the label asked for it.
                    fallback = isolation_modes.strongest(False, self.library.ok)
                choice = isolation_modes.ModeChoice(
                    fallback,
                    f"node label {isolation_modes.NODE_LABEL}={choice.mode}: {problem}; "
                    f"running the cluster default {fallback!r}")
        self.choice = choice
        if isolation_modes.uses_mps(choice.mode) and self.daemon is None:
            self.daemon = MpsDaemon(self._config.isolation.mps)
        return choice

    def node_isolation(self) -> NodeIsolation:
        """The inventory's node-level statement: what the node runs toward, and why what
        runs now is less."""
        return NodeIsolation(self.choice.mode, self.auto is not None, self.current().problem)

    def current(self) -> Live:
        live = self._current()
        if self.auto is not None:
            live = dataclasses.replace(live, detail=f"{live.detail}; chosen by auto: "
                                                    f"{self.auto}")
        return live

    def _current(self) -> Live:
        config, choice, library = self._config, self.choice, self.library
        if choice.mode == isolation_modes.NONE:
            return Live(isolation_modes.NONE, isolation_modes.NONE, False,
                        "no isolation configured: the GPUs only, no limits", choice.error)
        if choice.mode == isolation_modes.HAMI_CORE:
            return _hami(library, choice.error)
        mps = config.isolation.mps
        problem = None
        if self.daemon is None or not self.daemon.running:
            status = self.daemon.status() if self.daemon is not None else None
            problem = "MPS control daemon not running" + (
                f": {status.error}" if status is not None and status.error else "")
        elif not os.path.isdir(mps.pipe_dir):
            problem = f"MPS pipe folder {mps.pipe_dir} is missing"
        if problem is not None:
            return _hami(library, problem, f"MPS configured but {problem}; fell back to ")
        detail = (f"NVIDIA MPS per-client limits (pinned device memory, active thread "
                  f"percentage) through the daemon at {mps.pipe_dir}")
        if choice.mode == isolation_modes.MPS:
            return Live(isolation_modes.MPS, isolation_modes.MPS, True, detail, choice.error)
        if not library.ok:
            why = library.detail if library.path else "nodeagent.hamiCorePath is not set"
            return Live(isolation_modes.MPS, isolation_modes.MPS, True,
                        f"{detail}; without HAMi-core's memory hooks, so CUDA reports the "
                        f"whole GPU as total memory", f"mps-hami-core configured but {why}; "
                        f"running mps")
        return Live(isolation_modes.MPS_HAMI_CORE, isolation_modes.MPS_HAMI_CORE, True,
                    f"{detail}; HAMi-core ({library.path}) preloaded for its memory hooks: "
                    f"CUDA reports the grant as total memory", choice.error)


def node_label(port: ClusterPort | None, node: str) -> str | None:
    """The node's ``vgpu.io/isolation`` label; None without one, a cluster, or an answer."""
    if port is None:
        return None
    try:
        labels = meta.labels_of(port.get("nodes", node))
    except ClusterError as exc:
        _log.warning("cannot read this node's labels; using the cluster's isolation mode",
                     error=str(exc))
        return None
    return labels.get(isolation_modes.NODE_LABEL)
