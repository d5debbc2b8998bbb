"""The MPS control daemon the node agent runs and supervises, one per node.

Started as NVIDIA's device plugin starts it: ``nvidia-cuda-mps-control -d`` with
``CUDA_MPS_PIPE_DIRECTORY`` and ``CUDA_MPS_LOG_DIRECTORY`` on host folders; asked whether it
is alive by sending it a harmless command (``get_default_active_thread_percentage``) on
stdin. ``-d`` forks into the background, so there is no child to wait on: a daemon that
answers is up, one that does not is restarted, with a backoff that doubles per failed
start. Before every start the daemon is asked once more: a probe can miss an answer (a
busy daemon, a slow command), and ``-d`` beside a daemon that still runs fails and leaves
the node without MPS until the backoff passes. A daemon that answers then, or one already
answering when the agent starts (it restarted), is adopted, and the agent never stops it:
its clients, the running pods, would lose their server.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vgpu import logs, loops
from vgpu.config.isolation_section import MpsConfig

_log = logs.get("vgpu.nodeagent.mps")

PROBE = "get_default_active_thread_percentage"
STOPPED, RUNNING, FAILED = "stopped", "running", "failed"

#: Runs argv with the text on stdin and the environment; returns (exit status, output).
Runner = Callable[[Sequence[str], str | None, Mapping[str, str], float], tuple[int, str]]


def run_command(argv: Sequence[str], stdin: str | None, env: Mapping[str, str],
                timeout: float) -> tuple[int, str]:
    try:
        done = subprocess.run(list(argv), input=stdin, env=dict(env), capture_output=True,
                              text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found (install the NVIDIA driver's MPS utilities or set "\
                    "isolation.mps.controlCommand)"
    except PermissionError:
        return 126, f"{argv[0]}: not executable"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(argv)}: no answer within {timeout:g}s"
    return done.returncode, (done.stdout + done.stderr).strip()


@dataclass(frozen=True)
class DaemonStatus:
    state: str
    error: str | None
    starts: int
    restarts: int
    pipe_dir: str


class MpsDaemon:
    def __init__(self, config: MpsConfig, *, run: Runner = run_command,
                 clock: Callable[[], float] = time.monotonic,
                 environ: Mapping[str, str] | None = None) -> None:
        self._config = config
        self._run = run
        self._clock = clock
        self._argv = shlex.split(config.control_command)
        base = dict(os.environ if environ is None else environ)
        self._env = base | {"CUDA_MPS_PIPE_DIRECTORY": config.pipe_dir,
                            "CUDA_MPS_LOG_DIRECTORY": config.log_dir}
        self._lock = threading.Lock()
        self._ticking = threading.Lock()
        self._state = STOPPED
        self._error: str | None = None
        self._starts = 0
        self._restarts = 0
        self._backoff = config.restart_backoff_seconds
        self._next_try = 0.0

    # -- talking to the daemon -------------------------------------------------------------

    def command(self, text: str) -> tuple[int, str]:
        """Send one control command (``quit``, ``set_default_...``) and return its answer."""
        if not self._argv:
            return 2, "isolation.mps.controlCommand is empty"
        return self._run(self._argv, text + "\n", self._env,
                         self._config.command_timeout_seconds)

    def alive(self) -> bool:
        """The pipe folder is there and the daemon answers on it."""
        if not os.path.isdir(self._config.pipe_dir):
            return False
        code, _ = self.command(PROBE)
        return code == 0

    def _launch(self) -> str | None:
        """Start the daemon; the reason it did not come up, or None."""
        if not self._argv:
            return "isolation.mps.controlCommand is empty"
        for folder in (self._config.pipe_dir, self._config.log_dir):
            try:
                os.makedirs(folder, mode=0o755, exist_ok=True)
            except OSError as exc:
                return f"cannot create {folder}: {exc.strerror}"
        code, out = self._run([*self._argv, "-d"], None, self._env,
                              self._config.command_timeout_seconds)
        if code != 0:
            return f"{shlex.join([*self._argv, '-d'])} exited {code}: {out or 'no output'}"
        # The daemon makes its control pipe just after forking; give it a moment.
        deadline = self._clock() + min(2.0, self._config.command_timeout_seconds)
        while True:
            if self.alive():
                return None
            if self._clock() >= deadline:
                return (f"started, but it does not answer on {self._config.pipe_dir} "
                        f"(see {self._config.log_dir}/control.log)")
            time.sleep(0.05)

    # -- supervising -----------------------------------------------------------------------

    def tick(self) -> None:
        """One supervision step: check a running daemon, (re)start a stopped or dead one
        when its backoff has passed. The state lock is never held while a command runs, so
        readers (Allocate, /healthz, the device loop) never wait on a slow daemon."""
        with self._ticking:
            state, next_try = self.status().state, self._next_try
            if state == RUNNING:
                if self.alive():
                    return
                # One missed answer is not a dead daemon: ask again before starting one.
                if self.alive():
                    _log.info("the MPS control daemon missed one probe and answered the next",
                              pipe=self._config.pipe_dir)
                    return
                _log.warning("MPS control daemon died; restarting", pipe=self._config.pipe_dir)
                with self._lock:
                    self._state, self._error = FAILED, "the MPS control daemon stopped answering"
                    self._restarts += 1
                next_try = self._next_try = self._clock()
            elif self._clock() < next_try:
                return
            elif self.alive():
                # Up already: this agent restarted, or a start that looked failed came up.
                _log.info("adopting the running MPS control daemon", pipe=self._config.pipe_dir)
                with self._lock:
                    self._state, self._error = RUNNING, None
                    self._backoff = self._config.restart_backoff_seconds
                return
            with self._lock:
                self._starts += 1
            error = self._launch()
            with self._lock:
                if error is None:
                    self._state, self._error = RUNNING, None
                    self._backoff = self._config.restart_backoff_seconds
                else:
                    self._state, self._error = FAILED, error
                    self._next_try = self._clock() + self._backoff
                    wait, self._backoff = self._backoff, min(
                        self._backoff * 2, self._config.restart_backoff_max_seconds)
            if error is None:
                _log.info("MPS control daemon running", pipe=self._config.pipe_dir,
                          starts=self._starts)
            else:
                _log.error("MPS control daemon did not start; retrying", error=error,
                           retry_in=wait)

    def run(self, stop: threading.Event) -> None:
        while True:
            loops.survive("mps-daemon", self.tick)  # supervision outlives one bad round
            with self._lock:
                wait = self._config.check_seconds
                if self._state != RUNNING:
                    wait = min(wait, max(0.01, self._next_try - self._clock()))
            if stop.wait(wait):
                return

    def status(self) -> DaemonStatus:
        with self._lock:
            return DaemonStatus(self._state, self._error, self._starts, self._restarts,
                                self._config.pipe_dir)

    @property
    def running(self) -> bool:
        return self.status().state == RUNNING
