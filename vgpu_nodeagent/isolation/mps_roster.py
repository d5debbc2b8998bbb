"""Who the MPS control daemon serves: its servers, their clients, and the pods those are.

``get_server_list`` names each MPS server's PID and ``get_client_list <server>`` the PIDs of
its clients (host PIDs: the daemon is the agent's child and the agent runs with
``hostPID``). Each client's ``/proc/<pid>/cgroup`` names its pod and container, which the
pods in the agent's watch turn into a name and the GPUs the container was granted
(:func:`vgpu_nodeagent.isolation.watchdog.owners_of`, the watchdog's own mapping). A
server's ``/proc/<pid>/status`` gives the user it serves, so that a server that is gone
can be started again for that user.

A fault ends the clients it hits and they leave the lists within moments, so the roster is
read now and then and the last one is kept: the clients a fault hit are those of the last
roster before it and of the one read right after (docs/isolation.md#fault-reports).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from vgpu.cluster.port import Obj
from vgpu_nodeagent.isolation.usage_rules import Owner
from vgpu_nodeagent.isolation.watchdog import owners_of

#: Sends one control command and returns (exit status, output): ``MpsDaemon.command``.
Command = Callable[[str], tuple[int, str]]


def pids(text: str) -> tuple[int, ...]:
    """The PIDs a control command printed (one a line, or separated by spaces)."""
    return tuple(int(word) for word in text.split() if word.isdigit())


@dataclass(frozen=True)
class Client:
    pid: int
    #: Its pod and container, with the container's grants; None: not a pod's process
    #: (or one that ended before it was looked up).
    owner: Owner | None

    def on(self, gpu: str | None) -> bool:
        """Whether a fault on ``gpu`` (None: which is not known) reached this client: MPS
        contains a fault to the GPUs its clients share with the faulting one. A client
        whose GPUs are not known (no vgpu grant) counts as reached."""
        if gpu is None or self.owner is None or not self.owner.grants:
            return True
        return gpu in self.owner.grants


@dataclass(frozen=True)
class Server:
    pid: int
    #: The Linux user it serves (None: unknown); a server is per user.
    uid: int | None
    clients: tuple[Client, ...] = ()


@dataclass(frozen=True)
class Roster:
    servers: Mapping[int, Server] = field(default_factory=dict)
    #: When it was read (the agent's monotonic clock).
    at: float = 0.0

    def clients(self) -> Iterator[tuple[Server, Client]]:
        for server in self.servers.values():
            for client in server.clients:
                yield server, client


def status_uid(proc_root: str, pid: int) -> int | None:
    """The real user id of process ``pid``, from its ``/proc/<pid>/status``."""
    try:
        with open(os.path.join(proc_root, str(pid), "status"), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    fields = line.split()
                    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    except OSError:
        return None
    return None


def read_cgroup(proc_root: str, pid: int) -> str | None:
    try:
        with open(os.path.join(proc_root, str(pid), "cgroup"), encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None  # the process ended, or /proc is not the host's


def read_roster(command: Command, pods: Sequence[Obj], *, schedulers: Collection[str],
                proc_root: str, now: float) -> Roster | None:
    """The daemon's servers and clients now, each client tied to its pod; None when the
    daemon does not answer."""
    code, out = command("get_server_list")
    if code != 0:
        return None
    listed: dict[int, tuple[int, ...]] = {}
    for server in pids(out):
        code, out = command(f"get_client_list {server}")
        # A server that went between the two commands has no clients to list.
        listed[server] = pids(out) if code == 0 else ()
    everyone = sorted({pid for clients in listed.values() for pid in clients})
    owners = owners_of(everyone, pods, lambda pid: read_cgroup(proc_root, pid), schedulers)
    return Roster({server: Server(server, status_uid(proc_root, server),
                                  tuple(Client(pid, owners.get(pid)) for pid in clients))
                   for server, clients in listed.items()}, now)


def reached(rosters: Sequence[Roster], gpu: str | None,
            server: int | None = None) -> list[tuple[Server, Client]]:
    """The clients of ``rosters`` (each PID once, the latest roster's entry first) that a
    fault on ``gpu`` reached, of ``server`` only when one is named."""
    seen: set[int] = set()
    out: list[tuple[Server, Client]] = []
    for roster in reversed(rosters):
        for srv, client in roster.clients():
            if client.pid in seen or (server is not None and srv.pid != server):
                continue
            if client.on(gpu):
                seen.add(client.pid)
                out.append((srv, client))
    return out
