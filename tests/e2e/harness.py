"""The whole of vgpu running as processes on the e2e control plane.

:class:`FullStack` starts, against a :class:`ControlPlane`:

* ``vgpu webhook`` with certificates from ``vgpu certs --out-dir``, registered by URL
  (``https://localhost:PORT/mutate``, ``/validate``; its CA in ``caBundle``) from the
  product's registration manifests: ``failurePolicy: Fail``, the system-namespace selector
  and a term sending only this stack's namespaces (``matchConditions`` taken out: 1.20
  drops it, so the webhook passes what it need not look at; the 1.20 overlay's Ignore is
  unneeded with that term). The components run as the admin user, the stack's one
  ``webhook.annotationWriters``;
* ``vgpu scheduler``;
* per simulated GPU node, a :class:`NodeKubelet` (the Node object, the device-plugin
  registration socket, pod admission through GetPreferredAllocation + Allocate) and a
  real ``vgpu nodeagent`` on a fake-GPU file.

All three components read one config file (as they read the ``vgpu-config`` ConfigMap in a
cluster): the manifests' ``config.yaml`` with a scheduler name of this stack's own, so that
pods other tests left pending for ``vgpu-scheduler`` are never this scheduler's business.

Every wait is bounded; :meth:`FullStack.stop` ends exactly the processes it started (their
own process groups, SIGTERM, then SIGKILL after a bound) and deletes what it created.

The pieces are beside it: ``harness_processes`` (the processes and the waits),
``harness_nodes`` (the simulated nodes) and ``harness_pods`` (what tests do on a running
stack); the names tests import from here stay importable from this module.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.controlplane.binaries import ensure_node_binaries
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.pki import ADMIN_USER
from tests.controlplane.real_node import RealNode
from tests.e2e import harness_webhook
from tests.e2e.harness_nodes import Gpu, NodeSpec, SimNode, live_gpu_nodes
from tests.e2e.harness_pods import StackPods, allocated, bind_phase
from tests.e2e.harness_processes import (
    ROOT,
    OpsAccess,
    Processes,
    child_env,
    free_port,
    log_event,
    metrics_server,
    ops_get,
    vgpu_command,
    wait_until,
)
from tests.support.kubelet_node import NodeKubelet
from vgpu import config as vgpu_config
from vgpu import meta
from vgpu.annotations import NODE_GPUS
from vgpu.codecs import decode_inventory
from vgpu.kube.adapter import KubeCluster, connect

MANIFESTS = ROOT / "manifests"
BASE_CONFIG = MANIFESTS / "base" / "core" / "config.yaml"
#: What the node agents advertise (the config's default resource name).
RESOURCE = "nvidia.com/gpu"

#: What tests import from here (the pieces live in the harness_* modules).
__all__ = ["FullStack", "Gpu", "NodeSpec", "OpsAccess", "SimNode", "StackPods", "allocated",
           "bind_phase", "free_port", "wait_until"]


class FullStack(StackPods):
    def __init__(self, control_plane: ControlPlane, nodes: Sequence[NodeSpec], *,
                 config: Mapping[str, Any] | None = None, startup_timeout: float = 90.0,
                 agent_metrics: bool = False, kubeconfigs: Mapping[str, Path] | None = None,
                 ops_access: OpsAccess | None = None) -> None:
        self.cp = control_plane
        self.tag = uuid.uuid4().hex[:6]
        self.node_specs = [dataclasses.replace(n, name=f"{n.name}-{self.tag}",
                                               labels={"gpu": "on", **n.labels})
                           for n in nodes]
        self.scheduler_name = f"vgpu-scheduler-{self.tag}"
        self.webhook_name = f"vgpu-e2e-{self.tag}"
        self._config_overrides = dict(config or {})
        self._startup_timeout = startup_timeout
        # Built (or found in the cache) before start() times anything: a cold build takes
        # minutes and would eat the first real node's start-up budget.
        self._node_binaries = ensure_node_binaries() if any(
            n.real for n in self.node_specs) else None
        self.workdir = Path(tempfile.mkdtemp(prefix="vgpu-stack-"))
        self.procs = Processes(self.workdir)
        self.cluster: KubeCluster = _connect(control_plane)
        self.nodes: dict[str, SimNode] = {}
        self.config: dict[str, Any] = {}
        self.webhook_port = 0
        self.webhook_metrics_port = 0
        self.scheduler_metrics_port = 0
        self._registered, self._agent_metrics = False, agent_metrics
        self.ops_access = ops_access
        # A component ("scheduler", "nodeagent") may reach the API server another way,
        # e.g. through the fault suite's proxy.
        self._kubeconfigs = dict(kubeconfigs or {})
        self._agent_argv: dict[str, list[str]] = {}
        self._restarts: dict[str, int] = {}
        self._scheduler_argv: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> FullStack:
        try:
            self.start()
        except BaseException as exc:
            logs = self.logs()
            self.stop()
            raise AssertionError(f"the stack did not start: {exc}\nlogs:\n{logs}") from exc
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        began = time.monotonic()
        self.config = self._write_config()
        expiry = vgpu_config.load(str(self.workdir / "config.yaml"),
                                  {}).node_heartbeat_expiry_seconds
        foreign = live_gpu_nodes(self.cluster.list("nodes").items, expiry)
        if foreign:
            # They would take this stack's pods and make every capacity assertion wrong:
            # refuse to run rather than pass by luck.
            raise AssertionError(f"GPU nodes with a live heartbeat already exist: {foreign}; "
                                 f"a test that leaves such nodes must delete them")
        tls = self.workdir / "tls"
        certs = subprocess.run(vgpu_command("certs", "--out-dir", str(tls),
                                            "--dns-name", "localhost"),
                               capture_output=True, text=True, timeout=60, check=False,
                               env=child_env(), cwd=ROOT)
        if certs.returncode != 0:
            raise AssertionError(f"vgpu certs failed: {certs.stderr}{certs.stdout}")

        kubeconfig = str(self.cp.kubeconfig)
        config = str(self.workdir / "config.yaml")
        # Every process is started before any is waited for: their imports overlap.
        self.procs.start("webhook", vgpu_command(
            "webhook", "--cert-file", str(tls / "tls.crt"), "--key-file", str(tls / "tls.key"),
            "--address", "127.0.0.1", "--port", "0", "--metrics-port", "0",
            "--kubeconfig", kubeconfig, "--config", config))
        self.scheduler_metrics_port = free_port()
        self._scheduler_argv = vgpu_command(
            "scheduler", "--kubeconfig", str(self._kubeconfigs.get("scheduler", kubeconfig)),
            "--config", config, "--address",
            "127.0.0.1", "--metrics-port", str(self.scheduler_metrics_port))
        self.procs.start("scheduler", self._scheduler_argv)
        for spec in self.node_specs:
            self._start_node(spec, str(self._kubeconfigs.get("nodeagent", kubeconfig)), config)

        def remaining() -> float:
            return max(1.0, self._startup_timeout - (time.monotonic() - began))

        for node in self.nodes.values():
            self._wait_node_ready(node, remaining())
        self._wait_webhook_ready(remaining())
        self._register_webhook(tls / "ca.crt")
        self._wait_scheduler_ready(remaining())
        self.startup_seconds = time.monotonic() - began

    def stop(self) -> None:
        """Unregister the webhook first (a Fail policy with nobody serving would refuse GPU
        pods), then stop every process and kubelet, then delete the Nodes."""
        if self._registered:
            harness_webhook.unregister(self.cluster, self.webhook_name)
            self._registered = False
        self.procs.stop()
        for node in self.nodes.values():
            node.kubelet.stop(delete_node=True)
        self.nodes = {}
        if not os.environ.get("VGPUDEV_KEEP_E2E"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- starting the pieces -----------------------------------------------------------------

    def _write_config(self) -> dict[str, Any]:
        config: dict[str, Any] = yaml.safe_load(BASE_CONFIG.read_text())
        config.update(schedulerName=self.scheduler_name,
                      webhook={"annotationWriters": [ADMIN_USER]},
                      metricsServer=metrics_server(self.ops_access))
        config.update(self._config_overrides)
        (self.workdir / "config.yaml").write_text(yaml.safe_dump(config))
        return config

    def _start_node(self, spec: NodeSpec, kubeconfig: str, config: str) -> None:
        kubelet: NodeKubelet | RealNode
        if spec.real:
            kubelet = RealNode(self.cp, spec.name, labels=spec.labels,
                               binaries=self._node_binaries)
            pod_resources = kubelet.pod_resources_socket
        else:
            kubelet = NodeKubelet(_connect(self.cp), spec.name, labels=spec.labels)
            pod_resources = ""  # the stand-in serves no pod-resources API
        node = SimNode(spec, kubelet, free_port() if self._agent_metrics else 0)
        self.nodes[spec.name] = node
        kubelet.start()
        devices = self.workdir / f"{spec.name}.devices.yaml"
        devices.write_text(yaml.safe_dump(spec.devices_file()))
        argv = vgpu_command(
            "nodeagent", "--node-name", spec.name, "--fake-devices", str(devices),
            "--device-plugin-dir", kubelet.plugin_dir, "--kubeconfig", kubeconfig,
            "--config", config, "--metrics-port", str(node.metrics_port),
            "--pod-resources-socket", pod_resources)
        self._agent_argv[spec.name] = argv
        self.procs.start(f"nodeagent-{spec.name}", argv)

    def kill_agent(self, node: str) -> None:
        """SIGKILL the node's agent, as an OOM kill or a crash ends it: nothing it does on a
        clean stop happens."""
        self.procs.kill(f"nodeagent-{node}")

    def restart_scheduler(self, timeout: float = 60.0) -> None:
        """Kill the scheduler (SIGKILL: nothing of its memory survives) and start a fresh
        one, which rebuilds its state from the API server; returns once it is ready."""
        self.procs.kill("scheduler")
        self._restarts["scheduler"] = self._restarts.get("scheduler", 0) + 1
        self.procs.start(f"scheduler-{self._restarts['scheduler']}", self._scheduler_argv)
        self._wait_scheduler_ready(timeout)

    def restart_agent(self, node: str) -> None:
        """Start the node's agent again, as its DaemonSet would."""
        self._restarts[node] = self._restarts.get(node, 0) + 1
        self.procs.start(f"nodeagent-{node}-{self._restarts[node]}", self._agent_argv[node])

    def _wait_node_ready(self, node: SimNode, timeout: float) -> None:
        """Registered with its kubelet, inventory published, devices in the Node's status."""
        split = int(self.config.get("deviceSplitCount", 10))
        want = len(node.spec.gpus) * split

        def ready() -> bool:
            self.procs.check_alive()
            obj = self.cluster.get("nodes", node.name)
            notes = meta.annotations_of(obj)
            allocatable = (obj.get("status") or {}).get("allocatable") or {}
            return (NODE_GPUS in notes and allocatable.get(RESOURCE) == str(want)
                    and len(decode_inventory(notes[NODE_GPUS]).devices) == len(node.spec.gpus))

        wait_until(f"node {node.name} ready", ready, timeout, interval=0.2,
                   context=self.logs)

    def _wait_webhook_ready(self, timeout: float) -> None:
        log = self.workdir / "webhook.log"

        def serving() -> dict[str, Any] | None:
            self.procs.check_alive()
            return log_event(log, "webhook serving")

        record = wait_until("webhook serving", serving, timeout, context=self.logs)
        self.webhook_port = int(record["port"])
        self.webhook_metrics_port = int(record["metrics_port"])
        gpus = sum(len(n.gpus) for n in self.node_specs)

        def sees_every_gpu() -> bool:
            self.procs.check_alive()
            port = self.webhook_metrics_port
            metrics = ops_get(self.ops_access, port, "/metrics")
            found = re.search(r"^vgpu_webhook_inventory_gpus (\S+)$", metrics or "", re.M)
            return ops_get(self.ops_access, port, "/readyz") is not None \
                and found is not None and float(found.group(1)) >= gpus

        wait_until("webhook ready with every node's GPUs", sees_every_gpu, timeout,
                   interval=0.2, context=self.logs)

    def _register_webhook(self, ca_crt: Path) -> None:
        self._registered = True
        harness_webhook.register(self.cluster, name=self.webhook_name, port=self.webhook_port,
                                 ca_pem=ca_crt.read_bytes(), tag=self.tag)

    def _wait_scheduler_ready(self, timeout: float) -> None:
        def ready() -> bool:
            self.procs.check_alive()
            return ops_get(self.ops_access, self.scheduler_metrics_port, "/readyz") is not None

        wait_until("scheduler ready", ready, timeout, interval=0.2, context=self.logs)

    # -- diagnostics -------------------------------------------------------------------------

    def logs(self, lines: int = 60) -> str:
        kubelets = "\n".join(n.describe() for n in self.nodes.values())
        return f"{self.procs.logs(lines)}\n{kubelets}"


def _connect(cp: ControlPlane) -> KubeCluster:
    cluster = connect(str(cp.kubeconfig))
    assert cluster is not None
    return cluster
