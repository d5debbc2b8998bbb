"""The scheduler as a service: scheduler, informers, events, metrics, probes and leader
election, wired over a cluster port (the API server's, or any other).

Leadership: every replica runs its informers from the start, so its cache, queue and
Permit gates are current when it takes over; only the holder of the Lease runs the
scheduling loop. A leader that loses the Lease stops scheduling at once and the process
ends (as kube-scheduler's does): whatever it assumed dies with it, and the restarted
replica rebuilds from the API server. On a clean stop the loop ends first, the bindings
in flight finish, and only then is the Lease given up, so the next leader never
decides before it can see this one's last bindings.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass

from vgpu import logs
from vgpu.cluster.leader import ElectionConfig, LeaderElector, LeaseStore
from vgpu.cluster.port import ClusterPort
from vgpu.config import Config
from vgpu.serving import PLAIN, Serving
from vgpu_scheduler.host.event_recorder import EventLimiter, RecordingPort
from vgpu_scheduler.host.health_server import HealthServer
from vgpu_scheduler.host.metrics import Metrics, State
from vgpu_scheduler.host.scheduler import Scheduler

_log = logs.get("vgpu.scheduler.service")


def default_identity() -> str:
    """The pod's name in a cluster; elsewhere the host name made unique per process."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Options:
    #: Port of /healthz, /readyz and /metrics; None: no server; 0: any free port.
    metrics_port: int | None = None
    address: str = ""
    #: HTTPS with delegated authentication, or plain HTTP on the loopback address.
    serving: Serving = PLAIN
    #: Leader election; None: this replica always schedules.
    election: ElectionConfig | None = None
    #: Server-side timeout of one watch request (the informers then resume).
    watch_timeout: float = 10.0


class Service:
    def __init__(self, config: Config, cluster: ClusterPort, *,
                 event_port: ClusterPort | None = None, leases: LeaseStore | None = None,
                 options: Options | None = None) -> None:
        self.options = options or Options()
        if self.options.election is not None and leases is None:
            raise ValueError("leader election needs a lease store")
        self.config = config
        sc = config.scheduler
        self.leading = threading.Event()
        self.lost = False
        self.port = RecordingPort(
            cluster, event_port,
            limiter=EventLimiter(sc.event_repeat_seconds, sc.event_repeat_max_seconds))
        self.scheduler = Scheduler(config, self.port)
        self.metrics = Metrics(self.scheduler, State(leading=self.leading.is_set))
        self.port.outcome = self.metrics.on_event
        self.scheduler.listeners.append(self.metrics.on_decision)
        pods = self.scheduler.informers(self.options.watch_timeout)[1]
        pods.add_handler(self.metrics.on_pod)
        self.elector = (LeaderElector(leases, self.options.election)
                        if self.options.election is not None and leases is not None else None)
        self.server: HealthServer | None = None

    # -- probes ----------------------------------------------------------------------------

    def healthz(self) -> tuple[bool, str]:
        stopped = [t.name for t in self.scheduler.informer_threads() if not t.is_alive()]
        if stopped:
            return False, f"stopped: {', '.join(stopped)}"
        return True, "ok"

    def readyz(self) -> tuple[bool, str]:
        if not self.scheduler.synced():
            return False, "caches not synced"
        return True, "leader" if self.leading.is_set() else "follower"

    # -- running ---------------------------------------------------------------------------

    def start_server(self) -> None:
        if self.options.metrics_port is not None and self.server is None:
            self.server = HealthServer(self.metrics.registry, self.healthz, self.readyz,
                                       self.options.metrics_port, self.options.address,
                                       serving=self.options.serving)
            self.server.start()

    def run(self, stop: threading.Event) -> int:
        """Serve until ``stop`` is set (0) or the Lease is lost (1)."""
        self.start_server()
        campaign_stop = threading.Event()
        campaign: threading.Thread | None = None
        try:
            self.scheduler.start_informers(stop, watch_timeout=self.options.watch_timeout)
            if self.elector is None:
                self.leading.set()
            else:
                campaign = threading.Thread(
                    target=self.elector.run, args=(campaign_stop, self._started,
                                                   lambda: self._stopped(stop)),
                    daemon=True, name="vgpu-scheduler-election")
                campaign.start()
            self.scheduler.run(stop, watch_timeout=self.options.watch_timeout,
                               leading=self.leading)
        finally:
            # Bindings are drained (Scheduler.run closed its pool): now the Lease can go.
            campaign_stop.set()
            if campaign is not None:
                campaign.join(timeout=10)
            stop.set()
            self.port.close()
            if self.server is not None:
                self.server.stop()
        if self.lost:
            _log.error("lost the lease; exiting so that a fresh replica rebuilds its state")
            return 1
        return 0

    def _started(self) -> None:
        wait = self.elector.takeover_wait() if self.elector is not None else 0.0
        if wait <= 0:
            self._lead()
            return
        # The old leader's last writes may still land until then (vgpu.cluster.leader).
        _log.info("leading once the previous leader's writes can no longer land",
                  wait_seconds=round(wait, 3))
        timer = threading.Timer(wait, self._lead)
        timer.daemon = True
        timer.start()

    def _lead(self) -> None:
        if self.elector is not None and not self.elector.is_leader.is_set():
            return  # lost it meanwhile
        _log.info("leading: scheduling")
        self.leading.set()

    def _stopped(self, stop: threading.Event) -> None:
        if self.leading.is_set() and not stop.is_set():
            self.lost = True
            self.leading.clear()
            stop.set()
        self.leading.clear()
