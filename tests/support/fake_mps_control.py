"""A stand-in for ``nvidia-cuda-mps-control``: records each call, and plays the daemon.

Every call appends one JSON line (argv, stdin, the two MPS folders) to
``$CUDA_MPS_LOG_DIRECTORY/commands.jsonl``. ``-d`` "starts" the daemon by creating
``$CUDA_MPS_PIPE_DIRECTORY/control`` (refused when ``$CUDA_MPS_LOG_DIRECTORY/refuse``
exists, and, as the real one does (driver 580, seen on an H100), with "An instance of this
daemon is already running" and status 1 while the file exists); a command on stdin is
answered while that file exists, ``quit`` removes it.
Deleting it plays a daemon that died; ``$CUDA_MPS_LOG_DIRECTORY/miss-once`` makes the next
command go unanswered once (a busy daemon), and is removed by it.

The servers and their clients: ``$CUDA_MPS_LOG_DIRECTORY/servers.json``
(``{"<server pid>": {"uid": 1000, "clients": [<pid>, ...]}}``), and one more server (PID
``$CUDA_MPS_PIPE_DIRECTORY/clients/server``'s content, else 4242, of this user) whose
clients are the live processes that put a file named for their PID in
``$CUDA_MPS_PIPE_DIRECTORY/clients/`` (what the bench's child stand-in does when it starts:
a client connecting). ``get_server_list`` and ``get_client_list <pid>`` answer from them;
``start_server -uid <uid>`` adds a server to ``servers.json``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


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
    elif command == "get_server_list":
        print("\n".join(servers(log, pipe)))
    elif command.startswith("get_client_list "):
        entry = servers(log, pipe).get(command.split()[1], {})
        print("\n".join(str(pid) for pid in entry.get("clients", [])))
    elif command.startswith("start_server -uid "):
        start_server(log, int(command.split()[2]))
    return 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def servers(log: str, pipe: str) -> dict[str, dict[str, Any]]:
    listed: dict[str, dict[str, Any]] = {}
    path = os.path.join(log, "servers.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            listed = json.load(handle)
    folder = os.path.join(pipe, "clients")
    if os.path.isdir(folder):
        server = "4242"
        if os.path.exists(os.path.join(folder, "server")):
            with open(os.path.join(folder, "server"), encoding="utf-8") as handle:
                server = handle.read().strip()
        clients = sorted(int(name) for name in os.listdir(folder)
                         if name.isdigit() and alive(int(name)))
        listed[server] = {"uid": os.getuid(), "clients": clients}
    return listed


def start_server(log: str, uid: int) -> None:
    path = os.path.join(log, "servers.json")
    listed: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            listed = json.load(handle)
    pid = max((int(k) for k in listed), default=5000) + 1
    listed[str(pid)] = {"uid": uid, "clients": []}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(listed, handle)


if __name__ == "__main__":
    sys.exit(main())
