"""``vgpu why POD`` (and ``kubectl vgpu why POD``): why a pod waits, and where it went."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from vgpu import config, meta
from vgpu.cluster.port import ClusterPort, Selector
from vgpu.config import cli as config_cli
from vgpu.errors import ConfigError, NotFoundError
from vgpu.kube import adapter
from vgpu_kubectl import why, why_render

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "explain one pod: admission, quota, queue, closest nodes, placement, Allocate"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", metavar="POD",
                        help="the pod's name (or NAMESPACE/NAME); for a pod a quota refused, "
                             "the name in the refusal, or its ReplicaSet's or Deployment's")
    parser.add_argument("-n", "--namespace", default="default",
                        help="the pod's namespace (default: default)")
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    config_cli.add_config_option(
        parser, "vgpu config file, for the scheduler name, memory scaling, heartbeat "
        "expiry, isolation mode and fault-domain defaults (default: $VGPU_CONFIG, else the "
        "defaults)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text",
                        help="output format")


def run(args: argparse.Namespace) -> int:
    cfg = config_cli.load_config(args)
    namespace, _, name = args.pod.rpartition("/")
    namespace = namespace or args.namespace
    if not name:
        raise ConfigError(f"{args.pod!r} names no pod")
    cluster = adapter.connect(args.kubeconfig)
    if cluster is None:
        raise ConfigError("no cluster configuration")
    report = collect(cluster, cfg, namespace, name, dt.datetime.now(dt.UTC))
    print(why_render.render_json(report) if args.output == "json"
          else why_render.render_text(report))
    sys.stdout.flush()
    return 0 if report.state not in ("not-found", "denied", "quota-refused") else 1


def collect(cluster: ClusterPort, cfg: config.Config, namespace: str, name: str,
            now: dt.datetime) -> why.Report:
    """Read what the report needs through the port: the pod and its events always; every
    node and pod only for a pending pod's closest nodes; the namespace's events only for a
    pod that does not exist (its owner's FailedCreate)."""
    try:
        pod = cluster.get("pods", name, namespace)
    except NotFoundError:
        pod = None
    events = cluster.list("events", Selector(namespace=namespace, involved_name=name)).items
    uid = meta.uid(pod) if pod is not None else ""
    if uid:
        # Events of an earlier pod of the same name are not this pod's story.
        events = [e for e in events if (e.get("involvedObject") or {}).get("uid") in (uid, None)]
    if pod is None:
        around = cluster.list("events", Selector(namespace=namespace)).items
        return why.build(namespace, name, why.Cluster(None, events, namespace_events=around),
                         config=cfg, now=now)
    nodes = cluster.list("nodes").items
    pending = not (pod.get("spec") or {}).get("nodeName")
    pods = cluster.list("pods").items if pending else []
    return why.build(namespace, name, why.Cluster(pod, events, nodes, pods), config=cfg,
                     now=now)
