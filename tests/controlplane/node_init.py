"""PID 1 of a real node's private mount and PID namespaces (run by ``node_namespace``).

A kubelet assumes it owns the machine: it writes kernel settings, it serves device plugins
at the fixed path ``/var/lib/kubelet/device-plugins`` and writes container logs under
``/var/log/pods``, and containerd's shims and containers outlive containerd. In here none
of that reaches the host:

* ``/run``, ``/var/lib`` and ``/var/log`` are fresh tmpfs mounts (nothing of the host's
  shows through), with the test's own folders bound at the kubelet's fixed paths;
* each ``/proc/sys`` file the kubelet checks is covered by a file holding the value it
  wants, so the kubelet (run with ``--protect-kernel-defaults``) neither changes the
  host's kernel settings nor refuses to start;
* every process started in here (containerd, kubelet, shims, containers) dies with this
  one, which the kernel guarantees for a PID namespace's init.

Runs with the standard library only (it starts before anything else is set up) and reaps
orphans, as an init must. SIGTERM ends it, and with it the namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _mount(*args: str) -> None:
    result = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"node_init: mount {' '.join(args)} failed: {result.stderr.strip()}")


def setup(args: argparse.Namespace) -> None:
    for target in args.tmpfs:
        _mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", target)
    for pair in args.bind:
        source, target = pair.split(":", 1)
        Path(target).mkdir(parents=True, exist_ok=True)
        _mount("--bind", source, target)
    values = Path(args.sysctl_dir)
    values.mkdir(parents=True, exist_ok=True)
    for pair in args.sysctl:
        name, value = pair.split("=", 1)
        holder = values / name
        holder.write_text(f"{value}\n")
        _mount("--bind", str(holder), f"/proc/sys/{name.replace('.', '/')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready", required=True, help="file written once set up")
    parser.add_argument("--tmpfs", action="append", default=[], metavar="DIR")
    parser.add_argument("--bind", action="append", default=[], metavar="SRC:DST")
    parser.add_argument("--sysctl", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--sysctl-dir", required=True)
    args = parser.parse_args(argv)
    if os.getpid() != 1:
        raise SystemExit("node_init: must run as PID 1 of a new PID namespace")

    def on_term(_signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            os.unlink(args.ready)
        # At once: waitpid would be retried after a handler that returns, and the
        # kernel kills the rest of the namespace when its init exits.
        os._exit(0)

    # PID 1 gets only the signals it handles, even from the host.
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    setup(args)
    Path(args.ready).write_text("ready\n")
    print("node namespace ready", flush=True)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
