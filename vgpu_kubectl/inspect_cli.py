"""``vgpu inspect`` (and ``kubectl vgpu inspect``): GPU allocation per node and GPU."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

from vgpu import config
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.config import cli as config_cli
from vgpu.errors import ClusterError, ConfigError
from vgpu.kube import adapter
from vgpu_kubectl import inspect, inspect_quota, inspect_render

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "show GPU allocation per node and GPU, the links between GPUs, and GPU quotas"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    config_cli.add_config_option(
        parser, "vgpu config file, for the scheduler name, memory scaling, heartbeat "
        "expiry, isolation mode and fault-domain defaults (default: $VGPU_CONFIG, else the "
        "defaults)")
    parser.add_argument("-d", "--details", action="store_true",
                        help="list the pods on each GPU and those charged to each quota")
    parser.add_argument("-t", "--topology", action="store_true",
                        help="print each node's GPU links as nvidia-smi topo -m does")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="output format (json always lists the pods and the links)")


def run(args: argparse.Namespace) -> int:
    cfg = config_cli.load_config(args)
    cluster = adapter.connect(args.kubeconfig)
    if cluster is None:
        raise ConfigError("no cluster configuration")
    pods = cluster.list("pods").items  # once, for both parts of the report
    report = collect(cluster, cfg, dt.datetime.now(dt.UTC), pods)
    quotas, warnings = collect_quotas(cluster, pods)
    if args.output == "json":
        body = inspect_render.to_json(report)
        body["quotas"] = inspect_quota.to_json(quotas)
        body["warnings"] += [{"object": "resourcequotas", "message": w} for w in warnings]
        print(json.dumps(body, indent=2))
    else:
        print(inspect_render.render_table(report, details=args.details,
                                          topology=args.topology))
        lines = inspect_quota.render_lines(quotas, details=args.details)
        if lines or warnings:
            print("\n".join(["", "GPU quotas:", *lines, *(f"WARNING {w}" for w in warnings)]))
    sys.stdout.flush()
    return 0


def collect(cluster: ClusterPort, cfg: config.Config, now: dt.datetime,
            pods: list[Obj] | None = None) -> inspect.Report:
    """Read every node and pod (unless ``pods`` is given) through the port and build the
    report."""
    nodes = cluster.list("nodes").items
    pods = cluster.list("pods").items if pods is None else pods
    return inspect.build(nodes, pods, now=now,
                         heartbeat_expiry_seconds=cfg.node_heartbeat_expiry_seconds,
                         scheduler_name=cfg.scheduler_name,
                         extra_schedulers=cfg.extra_scheduler_names,
                         memory_scaling=cfg.device_memory_scaling,
                         fault_defaults=cfg.isolation.fault_domains.defaults,
                         isolation_mode=cfg.isolation.mode)


def collect_quotas(cluster: ClusterPort, pods: list[Obj] | None = None
                   ) -> tuple[tuple[inspect_quota.QuotaRow, ...], tuple[str, ...]]:
    """Every namespace's ResourceQuotas that name a derived resource, with the pods charged
    to them (``pods``: every pod, when already listed). A user who may not list
    ResourceQuotas still gets the GPU report."""
    try:
        quotas = cluster.list("resourcequotas").items
    except ClusterError as exc:
        return (), (f"cannot list ResourceQuotas: {exc}",)
    return inspect_quota.build(quotas, cluster.list("pods").items if pods is None else pods)
