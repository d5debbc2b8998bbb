"""``vgpu nodeagent``: run the node agent (the kubelet device plugin) on one node."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import threading
from types import FrameType

from vgpu import logs
from vgpu.cluster.port import ClusterPort
from vgpu.config import cli as config_cli
from vgpu.errors import ConfigError
from vgpu.metrics_auth import Reviewer
from vgpu.serving import serving
from vgpu_nodeagent.agent import NodeAgent
from vgpu_nodeagent.devices.discovery import Discovery
from vgpu_nodeagent.devices.excluded import filtered
from vgpu_nodeagent.options import Options

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "run the node agent (kubelet device plugin)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME"),
                        help="this node's name in the cluster (default: $NODE_NAME)")
    parser.add_argument("--fake-devices", metavar="FILE",
                        help="describe the GPUs with a YAML/JSON file instead of NVML "
                             "(tests, demos, nodes without GPUs)")
    parser.add_argument("--device-plugin-dir", metavar="DIR",
                        help="kubelet device-plugin folder (default: "
                             "nodeagent.devicePluginDir, /var/lib/kubelet/device-plugins)")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig (default: in-cluster, then $KUBECONFIG, "
                             "then ~/.kube/config)")
    parser.add_argument("--pod-resources-socket", metavar="PATH",
                        help="the kubelet's pod-resources socket (default: "
                             "nodeagent.podResourcesSocket, "
                             "/var/lib/kubelet/pod-resources/kubelet.sock); '' turns the "
                             "check off")
    config_cli.add_config_option(parser)
    parser.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="port of /metrics and /healthz (default: nodeagent.metricsPort, "
                             "9394); 0 turns them off")
    parser.add_argument("--proc-root", default="/proc", metavar="DIR",
                        help="the host's /proc, where the usage watchdog reads a GPU "
                             "process's cgroup by its host PID: the agent's own /proc with "
                             "hostPID, else the host's mounted read-only (default: /proc)")
    parser.add_argument("--no-cluster", action="store_true",
                        help="run without cluster access: the inventory is logged instead "
                             "of published, and Allocate fails (it cannot find the pod)")


def _discovery(args: argparse.Namespace) -> Discovery:
    if args.fake_devices:
        from vgpu_nodeagent.devices.fake import FakeDiscovery  # noqa: PLC0415 - one backend per run
        return FakeDiscovery(args.fake_devices)
    from vgpu_nodeagent.devices.nvml import NvmlDiscovery  # noqa: PLC0415
    return NvmlDiscovery()


def _cluster(args: argparse.Namespace) -> tuple[ClusterPort | None, Reviewer | None]:
    """The cluster and the reviewer of the metrics port's callers (on a connection apart)."""
    if args.no_cluster:
        return None, None
    # Imported only when needed: the kubernetes client is the agent's largest import.
    from vgpu.kube.adapter import connect  # noqa: PLC0415
    from vgpu.kube.reviews import KubeReviewer  # noqa: PLC0415
    try:
        cluster = connect(args.kubeconfig, required=True)
        reviews = connect(args.kubeconfig, required=True, qps=50, burst=100, pool_size=2)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; or pass --no-cluster to run without one (the inventory "
                          "is then only logged and Allocate fails)") from None
    return cluster, KubeReviewer(reviews) if reviews is not None else None


def run(args: argparse.Namespace) -> int:
    logs.setup()
    if not args.node_name:
        raise ConfigError("--node-name is required (or set NODE_NAME, e.g. from the "
                          "downward API's spec.nodeName)")
    cfg = config_cli.load_config(args)
    section = cfg.nodeagent
    if args.device_plugin_dir:
        section = dataclasses.replace(section, device_plugin_dir=args.device_plugin_dir)
    if args.pod_resources_socket is not None:
        section = dataclasses.replace(section, pod_resources_socket=args.pod_resources_socket)
    if args.metrics_port is not None:
        if not 0 <= args.metrics_port <= 65535:
            raise ConfigError(f"--metrics-port: {args.metrics_port} is not a port")
        if args.metrics_port:
            section = dataclasses.replace(section, metrics_port=args.metrics_port)
    cfg = dataclasses.replace(cfg, nodeagent=section)
    metrics_port = None if args.metrics_port == 0 else section.metrics_port

    discovery = filtered(_discovery(args), section.exclude_devices)
    port, reviewer = _cluster(args)
    if not os.path.isdir(args.proc_root):
        raise ConfigError(f"--proc-root {args.proc_root}: no such folder (mount the host's "
                          "/proc there, read-only)")
    agent = NodeAgent(cfg, discovery, port,
                      Options(node_name=args.node_name, metrics_port=metrics_port,
                              proc_root=args.proc_root,
                              metrics_serving=serving(cfg.metrics_server, reviewer,
                                                      name="vgpu-nodeagent")))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    agent.start()
    try:
        stop.wait()
    finally:
        agent.stop()
    return 0
