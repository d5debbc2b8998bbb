"""``vgpu inspect`` (and ``kubectl vgpu inspect``): GPU allocation per node and GPU."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from vgpu import config
from vgpu.cluster.port import ClusterPort
from vgpu.config import cli as config_cli
from vgpu.errors import ConfigError
from vgpu.kube import adapter
from vgpu_kubectl import inspect

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "show GPU allocation per node and GPU"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    config_cli.add_config_option(
        parser, "vgpu config file, for the scheduler name, memory scaling and heartbeat "
        "expiry (default: $VGPU_CONFIG, else the defaults)")
    parser.add_argument("-d", "--details", action="store_true",
                        help="list the pods on each GPU")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="output format (json always lists the pods)")


def run(args: argparse.Namespace) -> int:
    cfg = config_cli.load_config(args)
    cluster = adapter.connect(args.kubeconfig)
    if cluster is None:
        raise ConfigError("no cluster configuration")
    report = collect(cluster, cfg, dt.datetime.now(dt.UTC))
    if args.output == "json":
        print(inspect.render_json(report))
    else:
        print(inspect.render_table(report, details=args.details))
    sys.stdout.flush()
    return 0


def collect(cluster: ClusterPort, cfg: config.Config, now: dt.datetime) -> inspect.Report:
    """Read every node and pod through the port and build the report."""
    nodes = cluster.list("nodes").items
    pods = cluster.list("pods").items
    return inspect.build(nodes, pods, now=now,
                         heartbeat_expiry_seconds=cfg.node_heartbeat_expiry_seconds,
                         scheduler_name=cfg.scheduler_name,
                         extra_schedulers=cfg.extra_scheduler_names,
                         memory_scaling=cfg.device_memory_scaling)
