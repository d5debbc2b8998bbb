"""Child processes of the control plane: free ports, process groups, startup waits.

Each child runs in its own process group under ``setpriv --pdeathsig=TERM``, so that
stopping it reaches exactly what it spawned and a killed test run leaves nothing behind.
The e2e harness runs vgpu's components with the same :class:`ChildProcess`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from tests.controlplane.binaries import ControlPlaneError


class ExitedEarly(ControlPlaneError):
    """A child exited during startup: most often a port taken since we picked it."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent(argv: Sequence[str], signal_name: str = "TERM") -> list[str]:
    # If the Python process dies without stopping its children (SIGKILL, a
    # crashed test run), the kernel then sends them SIGTERM instead of leaving
    # etcd and the apiserver holding ports forever. setpriv (util-linux) sets
    # that before exec; a preexec_fn would do the same but is unsafe with threads.
    setpriv = shutil.which("setpriv")
    if setpriv is None or sys.platform != "linux":
        return list(argv)
    return [setpriv, f"--pdeathsig={signal_name}", "--", *argv]


class ChildProcess:
    """A child in its own process group, so that stopping it reaches only what it spawned."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, *,
                 env: dict[str, str] | None = None, cwd: Path | None = None,
                 pdeathsig: str = "TERM") -> None:
        self.name = name
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.popen = subprocess.Popen(
            _die_with_parent(argv, pdeathsig),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            pgid = self.popen.pid  # start_new_session: the child leads its own group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                self.popen.wait(timeout)
        self._log.close()


def wait_until(proc: ChildProcess, what: str, probe: Callable[[], bool],
               timeout: float) -> None:
    """Poll ``probe`` until it is true; :class:`ExitedEarly` if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise ExitedEarly(
                f"{proc.name} exited with code {proc.popen.returncode} before {what}; "
                f"last lines of {proc.log_path}:\n{proc.log_tail()}"
            )
        if probe():
            return
        time.sleep(0.2)
    raise ControlPlaneError(
        f"{what} not ready after {timeout:.0f}s; "
        f"last lines of {proc.log_path}:\n{proc.log_tail()}"
    )
