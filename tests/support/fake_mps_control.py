"""A stand-in for ``nvidia-cuda-mps-control``: records each call, and plays the daemon.

Every call appends one JSON line (argv, stdin, the two MPS folders) to
``$CUDA_MPS_LOG_DIRECTORY/commands.jsonl``. ``-d`` "starts" the daemon by creating
``$CUDA_MPS_PIPE_DIRECTORY/control`` (refused when ``$CUDA_MPS_LOG_DIRECTORY/refuse``
exists, and, as the real one does (driver 580, seen on an H100), with "An instance of this
daemon is already running" and status 1 while the file exists); a command on stdin is
answered while that file exists, ``quit`` removes it.
Deleting it plays a daemon that died; ``$CUDA_MPS_LOG_DIRECTORY/miss-once`` makes the next
command go unanswered once (a busy daemon), and is removed by it.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    log = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")
    daemon = "-d" in sys.argv[1:]
    stdin = "" if daemon else sys.stdin.read()
    os.makedirs(log, exist_ok=True)
    with open(os.path.join(log, "commands.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"argv": sys.argv[1:], "stdin": stdin, "pipe": pipe,
                                 "log": log}) + "\n")
    control = os.path.join(pipe, "control")
    if daemon:
        if os.path.exists(os.path.join(log, "refuse")):
            print("An instance of this daemon could not be started", file=sys.stderr)
            return 1
        if os.path.exists(control):
            print("An instance of this daemon is already running", file=sys.stderr)
            return 1
        with open(control, "w", encoding="utf-8"):
            pass
        return 0
    if not os.path.exists(control):
        print("Cannot find MPS control daemon process", file=sys.stderr)
        return 1
    miss = os.path.join(log, "miss-once")
    if os.path.exists(miss):
        os.unlink(miss)
        print("no answer", file=sys.stderr)
        return 1
    command = stdin.strip()
    if command == "quit":
        os.unlink(control)
    elif command.startswith("get_default_active_thread_percentage"):
        print("100.0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
