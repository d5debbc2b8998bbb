"""Faults reported to every pod they hit (docs/isolation.md#fault-reports).

On MPS a GPU is one fault domain: a client that faults ends the CUDA work of every client
of the same MPS server on that GPU (measured on an H100: the neighbour died mid-matmul with
``cudaErrorIllegalAddress``). The pods whose containers were those clients are told, each
with a ``SharedGPUFault`` Warning event that names the GPU, the XID and, when the kernel's
Xid line says, the pod that faulted; every fault is counted. Two signals start a report:

- an XID on a GPU (NVML's events; an application's XID too, which leaves the GPU healthy
  but still ends the server's clients there);
- an MPS server that exited with a non-zero status (the daemon's ``control.log``: "Server
  N exited with status 1"), which ends all its clients.

The clients hit are read from the daemon's lists (:mod:`.mps_roster`): the last roster
before the fault and one read right after it. One fault raises several XIDs (31, then 43
or 45): events on the same GPU within ``isolation.mps.faultWindowSeconds`` are one fault.
A server that is gone afterwards is started again for its user (``start_server -uid``), so
the next client finds one.
"""

from __future__ import annotations

import functools
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import Metric

from vgpu import logs, loops
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.config.isolation_section import MpsConfig
from vgpu_nodeagent import pod_actions
from vgpu_nodeagent.devices.log_tail import Tail
from vgpu_nodeagent.devices.xid import XidLine, parse_line
from vgpu_nodeagent.isolation import mps_roster
from vgpu_nodeagent.isolation.fault_report import (
    CAUSES,
    REASON,
    SERVER_EXIT,
    XID,
    Fault,
    by_pod,
    families,
    message,
)
from vgpu_nodeagent.isolation.mps import MpsDaemon
from vgpu_nodeagent.isolation.mps_roster import Client, Roster, Server
from vgpu_nodeagent.isolation.watchdog import owners_of

_log = logs.get("vgpu.nodeagent.mps_faults")

_EXIT = re.compile(r"Server (\d+) exited with status (-?\d+)")
#: How long a kernel Xid line stays a candidate for an NVML event that arrives after it.
_XID_LINE_SECONDS = 30.0


class MpsFaults:
    def __init__(self, config: MpsConfig, daemon: MpsDaemon,
                 pods: Callable[[], Sequence[Obj]], port: ClusterPort | None, *,
                 schedulers: Collection[str], proc_root: str = "/proc",
                 pci: Callable[[], Mapping[str, str]] = dict,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._daemon = daemon
        self._pods = pods
        self._port = port
        self._schedulers = schedulers
        self._proc = proc_root
        self._pci = pci  # GPU uuid -> PCI address, to match the kernel's Xid lines
        self._clock = clock
        self._events: queue.SimpleQueue[tuple[str | None, int, float]] = queue.SimpleQueue()
        self._kernel = Tail(config.kernel_log) if config.kernel_log else None
        self._control = Tail(os.path.join(config.log_dir, "control.log"))
        self._rosters: list[Roster] = []
        self._lines: list[tuple[float, XidLine]] = []
        self._reported_gpus: dict[str | None, float] = {}
        self._reported_servers: dict[int, float] = {}
        self._lock = threading.Lock()
        self.faults: dict[str, int] = dict.fromkeys(CAUSES, 0)
        self.pods_warned = 0
        self.servers_started = 0
        #: The faults reported, latest last (for tests and the bench).
        self.reported: list[Fault] = []

    # -- inputs ----------------------------------------------------------------------------

    def xid(self, gpu: str | None, xid: int) -> None:
        """An XID on ``gpu`` (the fault watch's thread): handled by :meth:`run`'s."""
        self._events.put((gpu, xid, self._clock()))

    def refresh(self) -> Roster | None:
        roster = mps_roster.read_roster(self._daemon.command, self._pods(),
                                        schedulers=self._schedulers, proc_root=self._proc,
                                        now=self._clock())
        if roster is not None:
            keep = roster.at - self._keep_seconds()
            self._rosters = [*(r for r in self._rosters if r.at >= keep), roster]
        return roster

    def _keep_seconds(self) -> float:
        return max(self._config.fault_window_seconds, 2 * self._config.roster_seconds) + 1

    def _before(self, at: float) -> list[Roster]:
        """The rosters that show who was connected when a fault at ``at`` struck: the last
        one read before it, and any read within two intervals of it (a client that left
        before those was gone before the fault)."""
        earlier = [r for r in self._rosters if r.at <= at][-1:]
        return [r for r in self._rosters
                if r.at >= at - 2 * self._config.roster_seconds or r in earlier]

    def _read_kernel(self) -> None:
        now = self._clock()
        if self._kernel is not None:
            for text in self._kernel.lines():
                line = parse_line(text)
                if line is not None:
                    self._lines.append((now, line))
        self._lines = [(at, line) for at, line in self._lines
                       if now - at <= _XID_LINE_SECONDS]

    # -- the loop --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        every = self._config.roster_seconds or 1.0
        next_roster = 0.0
        while not stop.is_set():
            try:
                event = self._events.get(timeout=max(0.01, min(every, 1.0)))
            except queue.Empty:
                event = None
            roster_due = bool(self._config.roster_seconds) and self._clock() >= next_roster
            if roster_due:
                next_roster = self._clock() + every
            # One bad round (a daemon that answers nonsense, an API error) must not end it.
            loops.survive("mps-faults", functools.partial(self.step, event, roster=roster_due))

    def step(self, event: tuple[str | None, int, float] | None = None, *,
             roster: bool = False) -> None:
        """One round: new kernel lines, the event if any (else the roster when due), and
        the servers that exited since the last round."""
        self._read_kernel()
        if event is not None:
            self._on_xid(*event)
        elif roster:
            self.refresh()
        self._check_exits()

    # -- faults ----------------------------------------------------------------------------

    def _recent(self, seen: Mapping[Any, float], key: object, at: float) -> bool:
        last = seen.get(key)
        return last is not None and at - last <= self._config.fault_window_seconds

    def _on_xid(self, gpu: str | None, xid: int, at: float) -> None:
        if self._recent(self._reported_gpus, gpu, at):
            _log.info("another XID of a fault already reported", gpu=gpu, xid=xid)
            return
        before = self._before(at)
        fresh = self.refresh()
        hit = mps_roster.reached([*before, *([fresh] if fresh is not None else [])], gpu)
        if not hit:
            _log.info("an XID on a GPU with no MPS client", gpu=gpu, xid=xid)
            return
        self._read_kernel()  # the driver's line may have come with the event
        culprit, why = self._culprit(gpu, xid, at, hit)
        self._reported_gpus[gpu] = at
        for server, _ in hit:
            self._reported_servers[server.pid] = at
        self._report(Fault(XID, gpu, xid, tuple(hit), culprit, why))

    def _culprit(self, gpu: str | None, xid: int, at: float,
                 hit: Sequence[tuple[Server, Client]]) -> tuple[Client | None, str]:
        if self._kernel is None:
            return None, "isolation.mps.kernelLog is off"
        if self._kernel.error is not None:
            return None, f"the kernel's Xid line is not readable: {self._kernel.error}"
        address = self._pci().get(gpu or "", "")
        for _, line in reversed(self._lines):
            if line.xid != xid or (address and line.pci != address):
                continue
            if line.pid is None:
                return None, "the kernel's Xid line names no process"
            for _, client in hit:
                if client.pid == line.pid:
                    return client, ""
            owners = owners_of([line.pid], self._pods(),
                               lambda pid: mps_roster.read_cgroup(self._proc, pid),
                               self._schedulers)
            return Client(line.pid, owners.get(line.pid)), ""
        return None, "no Xid line of the kernel's matches it"

    def _check_exits(self) -> None:
        now = self._clock()
        for text in self._control.lines():
            found = _EXIT.search(text)
            if found is None or found.group(2) == "0":
                continue
            server = int(found.group(1))
            if self._recent(self._reported_servers, server, now):
                continue  # its clients were told of the XID that ended it
            hit = mps_roster.reached(self._rosters, None, server=server)
            self._reported_servers[server] = now
            if hit:
                self._report(Fault(SERVER_EXIT, None, None, tuple(hit), None,
                                   f"the server exited with status {found.group(2)}"))
            else:
                _log.warning("an MPS server exited with an error; no client was seen on it",
                             server=server, status=found.group(2))

    def _report(self, fault: Fault) -> None:
        pods = by_pod(fault)
        _log.warning("a GPU fault ended the clients of an MPS server", cause=fault.cause,
                     gpu=fault.gpu, xid=fault.xid, pods=sorted(key for key, _ in
                                                                pods.values()),
                     culprit=None if fault.culprit is None else fault.culprit.pid)
        warned = 0
        for uid, (key, clients) in sorted(pods.items()):
            if pod_actions.warn(self._port, self._pods, key, REASON,
                                message(fault, uid, clients), uid=uid):
                warned += 1
        with self._lock:
            self.faults[fault.cause] += 1
            self.pods_warned += warned
            self.reported.append(fault)
        self._restore({server.pid: server for server, _ in fault.hit})

    def _restore(self, servers: Mapping[int, Server]) -> None:
        """Start a server again for each user whose server the fault took, so that the
        next client finds one; and make sure the control daemon itself still answers."""
        self._daemon.tick()
        code, out = self._daemon.command("get_server_list")
        if code != 0:
            return  # the daemon's supervision starts it again; it starts servers on demand
        running = set(mps_roster.pids(out))
        for server in servers.values():
            if server.pid in running or server.uid is None:
                continue
            code, out = self._daemon.command(f"start_server -uid {server.uid}")
            if code != 0:
                _log.warning("could not start an MPS server again", uid=server.uid,
                             answer=out)
                continue
            _log.info("started an MPS server again after a fault", uid=server.uid,
                      gone=server.pid)
            with self._lock:
                self.servers_started += 1

    def families(self) -> Iterator[Metric]:
        with self._lock:
            faults, pods, servers = dict(self.faults), self.pods_warned, self.servers_started
        yield from families(faults, pods, servers)
