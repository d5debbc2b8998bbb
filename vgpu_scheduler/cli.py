"""``vgpu scheduler``: run the vgpu scheduler against the cluster."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import threading
from typing import Any

from vgpu import logs
from vgpu.cluster.leader import ClusterLeaseStore, ElectionConfig
from vgpu.cluster.twins import holder_identity
from vgpu.config import Config, SchedulerConfig, scoring_keys
from vgpu.config import cli as config_cli
from vgpu.errors import ConfigError
from vgpu.kube.adapter import KubeCluster, connect
from vgpu.kube.reviews import KubeReviewer
from vgpu.serving import serving
from vgpu_scheduler.host.service import Options, Service, default_identity

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "run the vgpu scheduler"

_log = logs.get("vgpu.scheduler")

DEFAULT_LEASE = "vgpu-scheduler"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="cluster to schedule in (default: in-cluster, then $KUBECONFIG "
                             "or ~/.kube/config)")
    config_cli.add_config_option(parser)
    parser.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="port of /healthz, /readyz and /metrics, HTTPS unless "
                             "metricsServer.insecure (default: scheduler.metricsPort of the "
                             "config, 9396; 0: any free port)")
    parser.add_argument("--address", default="", metavar="ADDR",
                        help="address that port listens on (default: every address)")
    parser.add_argument("--kube-api-qps", type=float, metavar="N",
                        help="client-side limit on API requests per second (default: "
                             "scheduler.apiQps, 500)")
    parser.add_argument("--kube-api-burst", type=int, metavar="N",
                        help="requests allowed above the limit in a burst (default: "
                             "scheduler.apiBurst, 1000)")
    election = parser.add_argument_group(
        "leader election", "with more than one replica, only the holder of a "
        "coordination.k8s.io/v1 Lease schedules; the others keep their caches warm and take "
        "over when it stops renewing")
    election.add_argument("--leader-elect", action="store_true",
                          help="campaign for the Lease before scheduling")
    election.add_argument("--lease-name", default=DEFAULT_LEASE, metavar="NAME",
                          help=f"name of the Lease (default: {DEFAULT_LEASE})")
    election.add_argument("--lease-namespace", metavar="NAMESPACE",
                          default=os.environ.get("POD_NAMESPACE") or "vgpu-system",
                          help="namespace of the Lease (default: $POD_NAMESPACE, else "
                               "vgpu-system)")
    election.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS",
                          help="how long followers wait after the last renewal before "
                               "taking over (default: 15)")
    election.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS",
                          help="a leader that could not renew for this long stops "
                               "(default: 10; less than --lease-duration)")
    election.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS",
                          help="how often to renew or try to acquire (default: 2)")
    election.add_argument("--identity", metavar="ID",
                          help="this replica's name in the Lease, to which a nonce per "
                               "process is added (default: $POD_NAME, else the host name)")


def election_config(args: argparse.Namespace) -> ElectionConfig | None:
    if not args.leader_elect:
        return None
    if not 0 < args.retry_period < args.renew_deadline < args.lease_duration:
        raise ConfigError(
            "leader election needs 0 < --retry-period < --renew-deadline < --lease-duration "
            f"(got {args.retry_period:g}, {args.renew_deadline:g}, {args.lease_duration:g})")
    if not args.lease_name or not args.lease_namespace:
        raise ConfigError("--lease-name and --lease-namespace must not be empty")
    if args.identity is not None and not args.identity:
        raise ConfigError("--identity must not be empty")
    # A nonce per process: two replicas given one --identity never share a holder.
    return ElectionConfig(namespace=args.lease_namespace, name=args.lease_name,
                          identity=holder_identity(args.identity or default_identity()),
                          lease_duration=args.lease_duration,
                          renew_deadline=args.renew_deadline, retry_period=args.retry_period)


def load_config(args: argparse.Namespace) -> Config:
    cfg = config_cli.load_config(args)
    overrides: dict[str, Any] = {}
    if args.kube_api_qps is not None:
        if args.kube_api_qps < 0:
            raise ConfigError(f"--kube-api-qps {args.kube_api_qps:g}: must be 0 or more")
        overrides["api_qps"] = args.kube_api_qps
    if args.kube_api_burst is not None:
        if args.kube_api_burst < 1:
            raise ConfigError(f"--kube-api-burst {args.kube_api_burst}: must be 1 or more")
        overrides["api_burst"] = args.kube_api_burst
    if args.metrics_port is not None:
        if not 0 <= args.metrics_port <= 65535:
            raise ConfigError(f"--metrics-port {args.metrics_port}: a port is between 0 and "
                              "65535")
        overrides["metrics_port"] = args.metrics_port
    if overrides:
        cfg = dataclasses.replace(cfg, scheduler=dataclasses.replace(cfg.scheduler, **overrides))
    return cfg


def _connect(kubeconfig: str | None, qps: float, burst: int, pool: int) -> KubeCluster:
    cluster = connect(kubeconfig, qps=qps, burst=burst, pool_size=pool)
    assert cluster is not None  # required=True: no configuration raises ConfigError
    return cluster


@dataclasses.dataclass(frozen=True)
class Connections:
    """One connection each for the scheduler's own requests, its events and its Lease, so
    that neither a burst of events nor a burst of bindings can delay a renewal."""

    cluster: KubeCluster
    events: KubeCluster
    leases: KubeCluster | None


def connections(kubeconfig: str | None, sc: SchedulerConfig,
                election: ElectionConfig | None) -> Connections:
    """The connections, each write on them bounded in time (issue 46): the scheduler's
    and its events' by ``scheduler.writeTimeoutSeconds``, as the next leader counts on; a
    renewal by the renew deadline it is meant to meet, as client-go's."""
    cluster = _connect(kubeconfig, sc.api_qps, sc.api_burst, max(16, sc.bind_workers + 8))
    events = _connect(kubeconfig, sc.event_qps, sc.event_burst, 4)
    cluster.write_timeout = events.write_timeout = sc.write_timeout_seconds
    leases = None
    if election is not None:
        leases = _connect(kubeconfig, 0, 1, 2)
        leases.write_timeout = election.renew_deadline
    return Connections(cluster, events, leases)


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    election = election_config(args)
    sc = cfg.scheduler
    if election is not None:
        # What the next leader waits beyond this one's renew deadline: how long a write
        # of this one may stay in flight.
        election = dataclasses.replace(election, in_flight=sc.write_timeout_seconds)
    conns = connections(args.kubeconfig, sc, election)
    cluster, events = conns.cluster, conns.events
    leases = ClusterLeaseStore(conns.leases) if conns.leases is not None else None
    # The metrics port's reviews (TokenReview, SubjectAccessReview) on a connection apart.
    reviews = KubeReviewer(_connect(args.kubeconfig, 50, 100, 2))
    service = Service(cfg, cluster, event_port=events, leases=leases,
                      options=Options(metrics_port=sc.metrics_port, address=args.address,
                                      election=election,
                                      serving=serving(cfg.metrics_server, reviews,
                                                      name="vgpu-scheduler")))
    if service.elector is not None:
        # Every write of the scheduler's own connection and of its events' is fenced by its
        # Lease (the Lease's connection is apart, so that the renewals themselves never are).
        cluster.fence = events.fence = service.elector.fence
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        service.start_server()
    except OSError as exc:
        raise ConfigError(f"cannot listen on port {sc.metrics_port}: "
                          f"{exc.strerror or exc}") from None
    for warning in scoring_keys.warnings(sc):
        _log.warning("config", detail=warning)
    _log.info("starting", scheduler_name=cfg.scheduler_name,
              leader_elect=election is not None,
              identity=election.identity if election else None,
              metrics_port=service.server.port if service.server else None)
    return service.run(stop)
