"""``vgpu webhook``: run the mutating admission webhook."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import threading

from vgpu import logs
from vgpu.config import cli as config_cli
from vgpu.errors import ConfigError
from vgpu.kube.adapter import connect
from vgpu.kube.reviews import KubeReviewer
from vgpu.serving import serving
from vgpu_webhook.admission_server import WebhookServer
from vgpu_webhook.agent_nodes import AgentNodes
from vgpu_webhook.denials import DenialRecorder
from vgpu_webhook.tls import CertReloader
from vgpu_webhook.watch import no_cluster, watch_nodes

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "run the mutating admission webhook"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cert-file", required=True, metavar="FILE",
                        help="PEM certificate (chain) served on /mutate; reloaded when it "
                             "changes")
    parser.add_argument("--key-file", required=True, metavar="FILE",
                        help="PEM private key of the certificate")
    parser.add_argument("--port", type=int, metavar="PORT",
                        help="HTTPS port of /mutate (default: webhook.port of the config, "
                             "9443)")
    parser.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="port of /healthz, /readyz and /metrics (default: "
                             "webhook.metricsPort of the config, 9395; HTTPS unless "
                             "metricsServer.insecure)")
    parser.add_argument("--address", default="", metavar="ADDR",
                        help="address to listen on (default: every address)")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="cluster to watch Nodes in (default: in-cluster, then "
                             "$KUBECONFIG; with none, run without a node inventory)")
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "vgpu-system"),
                        metavar="NAMESPACE",
                        help="namespace of the ConfigMap vgpu-gpu-types, the GPU types seen "
                             "before (default: $POD_NAMESPACE, else vgpu-system)")
    config_cli.add_config_option(parser)


def _port(value: int | None, flag: str) -> int | None:
    if value is not None and not 0 <= value <= 65535:
        raise ConfigError(f"{flag} {value}: a port is between 0 and 65535")
    return value


def run(args: argparse.Namespace) -> int:
    logs.setup()
    cfg = config_cli.load_config(args)
    tls = CertReloader(args.cert_file, args.key_file)
    stop = threading.Event()
    try:
        cluster = connect(args.kubeconfig, required=bool(args.kubeconfig))
        view = watch_nodes(cluster, stop, namespace=args.namespace,
                           remember=cfg.quota.remember_gpu_types) if cluster is not None \
            else no_cluster()
        rate = cfg.webhook.denial_events_per_second
        denials = DenialRecorder(cluster, per_second=rate, burst=max(1, int(rate * 10))) \
            if cluster is not None and rate > 0 else None
        # The operations port's reviews (TokenReview, SubjectAccessReview) on a connection
        # apart: a scrape's never waits behind the node watch's.
        reviews = connect(args.kubeconfig, required=False, qps=50, burst=100, pool_size=2) \
            if cluster is not None else None
        server = WebhookServer(cfg, view, tls, host=args.address,
                               port=_port(args.port, "--port"),
                               metrics_port=_port(args.metrics_port, "--metrics-port"),
                               reload_interval=cfg.webhook.cert_reload_seconds,
                               denials=denials, agent_nodes=AgentNodes(cluster),
                               serving=serving(cfg.metrics_server,
                                               KubeReviewer(reviews) if reviews else None,
                                               name="vgpu-webhook"))
        asyncio.run(_serve(server))
    finally:
        stop.set()
    return 0


async def _serve(server: WebhookServer) -> None:
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    try:
        await server.start()
    except OSError as exc:
        await server.stop()
        raise ConfigError(f"cannot listen on port {server.port} or {server.metrics_port}: "
                          f"{exc.strerror or exc}") from None
    try:
        await done.wait()
        logs.get("vgpu.webhook").info("stopping: finishing requests in flight")
    finally:
        await server.stop()
