"""The stack's processes: the ``vgpu`` command, its environment, and waiting on it.

:class:`Processes` starts vgpu's components as :class:`ChildProcess` children (their own
process groups, logs in one folder) and stops them together; ``wait_until``, ``log_event``
and ``http_get`` are how :class:`tests.e2e.harness.FullStack` and its tests wait for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.controlplane.cluster import ChildProcess

ROOT = Path(__file__).resolve().parents[2]

T = TypeVar("T")


def vgpu_command(*args: str) -> list[str]:
    """The ``vgpu`` command, run with this interpreter (the venv's console script may be
    missing in an editable checkout)."""
    return [sys.executable, "-m", "vgpu.cli", *args]


def child_env() -> dict[str, str]:
    """Our environment without ``VGPU_*`` settings (the config file is the one source of
    configuration), logging JSON lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.update(VGPU_LOG_FORMAT="json", VGPU_LOG_LEVEL="info", PYTHONUNBUFFERED="1")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Processes:
    """Child processes with their logs in one folder; stopped together."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.children: list[ChildProcess] = []

    def start(self, name: str, argv: Sequence[str]) -> ChildProcess:
        child = ChildProcess(name, argv, self.logdir / f"{name}.log", env=child_env(),
                             cwd=ROOT)
        self.children.append(child)
        return child

    def kill(self, prefix: str) -> None:
        """SIGKILL the children whose name starts with ``prefix`` (their whole groups), as
        an OOM kill or a crash ends a process, and forget them."""
        for child in [c for c in self.children if c.name.startswith(prefix)]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.popen.pid, signal.SIGKILL)
            child.popen.wait(10)
            child.stop()
            self.children.remove(child)

    def check_alive(self) -> None:
        dead = [c for c in self.children if not c.alive()]
        if dead:
            raise AssertionError("exited: " + "; ".join(
                f"{c.name} (exit code {c.popen.returncode}):\n{c.log_tail(30)}" for c in dead))

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to every group at once, then wait; SIGKILL whatever outlives ``timeout``."""
        for child in self.children:
            if child.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.popen.wait(max(0.1, deadline - time.monotonic()))
            child.stop(timeout)  # kills what is left, closes the log
        self.children = []

    def logs(self, lines: int = 60) -> str:
        return "\n".join(f"----- {c.name} (pid {c.popen.pid}, "
                         f"{'running' if c.alive() else f'exit {c.popen.returncode}'}) -----\n"
                         f"{c.log_tail(lines)}" for c in self.children)


def wait_until(what: str, check: Callable[[], T | None], timeout: float, *,
               interval: float = 0.1, context: Callable[[], str] | None = None) -> T:
    """``check()``'s first truthy value; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            more = f"\n{context()}" if context else ""
            raise AssertionError(f"{what}: not within {timeout:g} s{more}")
        time.sleep(interval)


def log_event(path: Path, event: str) -> dict[str, Any] | None:
    """The first JSON log line of ``path`` whose event is ``event``."""
    with contextlib.suppress(OSError), path.open(errors="replace") as lines:
        for line in lines:
            if f'"{event}"' in line:
                with contextlib.suppress(ValueError):
                    record: dict[str, Any] = json.loads(line)
                    if record.get("event") == event:
                        return record
    return None


def http_get(url: str, *, token: str | None = None,
             context: ssl.SSLContext | None = None) -> str | None:
    """The body of a 200 answer, else None (``token``: sent as a bearer token)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as resp:
            return str(resp.read().decode()) if resp.status == 200 else None
    except OSError:
        return None


@dataclass(frozen=True)
class OpsAccess:
    """The components' operations ports served as in a cluster (HTTPS with the given
    certificate, /metrics for callers the API server authorizes), and how the stack reads
    them: the CA to trust and a token allowed to get /metrics."""

    cert_file: Path
    key_file: Path
    ca_file: Path
    token: str


def metrics_server(access: OpsAccess | None) -> dict[str, Any]:
    """The config's ``metricsServer``: plain HTTP on the loopback address, read with no
    token, unless the stack is given ``access`` (test_ops_prometheus scrapes as Prometheus
    does in a cluster)."""
    if access is None:
        return {"insecure": True}
    return {"certFile": str(access.cert_file), "keyFile": str(access.key_file)}


def ops_get(access: OpsAccess | None, port: int, path: str) -> str | None:
    """A component's operations port on the loopback address: plain HTTP, or as
    ``access`` says."""
    if access is None:
        return http_get(f"http://127.0.0.1:{port}{path}")
    return http_get(f"https://127.0.0.1:{port}{path}", token=access.token,
                    context=ssl.create_default_context(cafile=str(access.ca_file)))
