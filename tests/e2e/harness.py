"""The whole of vgpu running as processes on the e2e control plane.

:class:`FullStack` starts, against a :class:`ControlPlane`:

* ``vgpu webhook`` with certificates from ``vgpu certs --out-dir``, registered by URL
  (``https://localhost:PORT/mutate``, its CA in ``caBundle``) from the product's own
  registration manifest: ``failurePolicy: Fail``, the system-namespace selector, and one
  more selector term so that only this stack's namespaces are sent (``matchConditions``
  is taken out: 1.20 drops it on write, so the webhook itself passes non-GPU pods; the
  k8s-1.20 overlay turns the policy to Ignore for that reason, which the extra selector
  term makes unnecessary here);
* ``vgpu scheduler``;
* per simulated GPU node, a :class:`NodeKubelet` (the Node object, the device-plugin
  registration socket, pod admission through GetPreferredAllocation + Allocate) and a
  real ``vgpu nodeagent`` on a fake-GPU file.

All three components read one config file (as they read the ``vgpu-config`` ConfigMap in a
cluster): the manifests' ``config.yaml`` with a scheduler name of this stack's own, so that
pods other tests left pending for ``vgpu-scheduler`` are never this scheduler's business.

Every wait is bounded; :meth:`FullStack.stop` ends exactly the processes it started (their
own process groups, SIGTERM, then SIGKILL after a bound) and deletes what it created in
the cluster. :meth:`FullStack.logs` is what to print when a test fails.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import yaml

from tests.controlplane.cluster import ChildProcess, ControlPlane
from tests.support.kubelet_node import Admission, NodeKubelet
from vgpu import config as vgpu_config
from vgpu.annotations import BIND_PHASE, NODE_GPUS, NODE_HEARTBEAT, PHASE_SUCCESS
from vgpu.cluster.port import Obj, Selector, key_of
from vgpu.codecs import decode_inventory, decode_time
from vgpu.errors import ClusterError, NotFoundError
from vgpu.kube.adapter import KubeCluster, connect

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
REGISTRATION = MANIFESTS / "webhook" / "mutatingwebhookconfiguration.yaml"
BASE_CONFIG = MANIFESTS / "base" / "core" / "config.yaml"
#: Namespace label the stack's webhook registration selects on (besides the system
#: namespaces' exclusion), so a registration can never reach another test's pods.
STACK_LABEL = "e2e.vgpu.io/stack"
#: Set by the API server itself from 1.21 on; set here by hand so that the manifest's
#: system-namespace selector is evaluated as written.
NAME_LABEL = "kubernetes.io/metadata.name"

T = TypeVar("T")


# -- processes -------------------------------------------------------------------------------


def vgpu_command(*args: str) -> list[str]:
    """The ``vgpu`` command, run with this interpreter (the venv's console script may be
    missing in an editable checkout)."""
    return [sys.executable, "-m", "vgpu.cli", *args]


def child_env() -> dict[str, str]:
    """Our environment without ``VGPU_*`` settings (the config file is the one source of
    configuration), logging JSON lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.update(VGPU_LOG_FORMAT="json", VGPU_LOG_LEVEL="info", PYTHONUNBUFFERED="1")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Processes:
    """Child processes with their logs in one folder; stopped together."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.children: list[ChildProcess] = []

    def start(self, name: str, argv: Sequence[str]) -> ChildProcess:
        child = ChildProcess(name, argv, self.logdir / f"{name}.log", env=child_env(),
                             cwd=ROOT)
        self.children.append(child)
        return child

    def check_alive(self) -> None:
        dead = [c for c in self.children if not c.alive()]
        if dead:
            raise AssertionError("exited: " + "; ".join(
                f"{c.name} (exit code {c.popen.returncode}):\n{c.log_tail(30)}" for c in dead))

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to every group at once, then wait; SIGKILL whatever outlives ``timeout``."""
        for child in self.children:
            if child.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.popen.wait(max(0.1, deadline - time.monotonic()))
            child.stop(timeout)  # kills what is left, closes the log
        self.children = []

    def logs(self, lines: int = 60) -> str:
        return "\n".join(f"----- {c.name} (pid {c.popen.pid}, "
                         f"{'running' if c.alive() else f'exit {c.popen.returncode}'}) -----\n"
                         f"{c.log_tail(lines)}" for c in self.children)


def wait_until(what: str, check: Callable[[], T | None], timeout: float, *,
               interval: float = 0.1, context: Callable[[], str] | None = None) -> T:
    """``check()``'s first truthy value; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            more = f"\n{context()}" if context else ""
            raise AssertionError(f"{what}: not within {timeout:g} s{more}")
        time.sleep(interval)


def log_event(path: Path, event: str) -> dict[str, Any] | None:
    """The first JSON log line of ``path`` whose event is ``event``."""
    with contextlib.suppress(OSError), path.open(errors="replace") as lines:
        for line in lines:
            if f'"{event}"' in line:
                with contextlib.suppress(ValueError):
                    record: dict[str, Any] = json.loads(line)
                    if record.get("event") == event:
                        return record
    return None


# -- the simulated nodes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    model: str
    memory_mib: int
    numa: int = 0
    #: What the fake backend reports for the agent's GPU metrics; None: left out.
    memory_used_mib: int | None = None
    utilization: int | None = None


@dataclass(frozen=True)
class NodeSpec:
    """A simulated GPU node; its GPUs get UUIDs ``GPU-<node>-<index>``."""

    name: str
    gpus: tuple[Gpu, ...]
    labels: Mapping[str, str] = field(default_factory=dict)

    def uuids(self) -> list[str]:
        return [f"GPU-{self.name}-{i}" for i in range(len(self.gpus))]

    def devices_file(self) -> dict[str, Any]:
        devices = []
        for i, (u, g) in enumerate(zip(self.uuids(), self.gpus, strict=True)):
            device: dict[str, Any] = {"uuid": u, "index": i, "model": g.model,
                                      "memory_mib": g.memory_mib, "numa": g.numa}
            for key in ("memory_used_mib", "utilization"):
                if getattr(g, key) is not None:
                    device[key] = getattr(g, key)
            devices.append(device)
        return {"devices": devices}


@dataclass
class SimNode:
    spec: NodeSpec
    kubelet: NodeKubelet
    #: The agent's /metrics port; 0: metrics off.
    metrics_port: int = 0

    @property
    def name(self) -> str:
        return self.spec.name


# -- the stack ---------------------------------------------------------------------------------


class FullStack:
    def __init__(self, control_plane: ControlPlane, nodes: Sequence[NodeSpec], *,
                 config: Mapping[str, Any] | None = None, startup_timeout: float = 90.0,
                 agent_metrics: bool = False) -> None:
        self.cp = control_plane
        self.tag = uuid.uuid4().hex[:6]
        self.node_specs = [NodeSpec(f"{n.name}-{self.tag}", n.gpus,
                                    {"gpu": "on", **n.labels}) for n in nodes]
        self.scheduler_name = f"vgpu-scheduler-{self.tag}"
        self.webhook_name = f"vgpu-e2e-{self.tag}"
        self._config_overrides = dict(config or {})
        self._startup_timeout = startup_timeout
        self.workdir = Path(tempfile.mkdtemp(prefix="vgpu-stack-"))
        self.procs = Processes(self.workdir)
        self.cluster: KubeCluster = _connect(control_plane)
        self.nodes: dict[str, SimNode] = {}
        self.config: dict[str, Any] = {}
        self.webhook_port = 0
        self.webhook_metrics_port = 0
        self.scheduler_metrics_port = 0
        self._registered = False
        self._agent_metrics = agent_metrics

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
        self._refuse_foreign_gpu_nodes()
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
        self.procs.start("scheduler", vgpu_command(
            "scheduler", "--kubeconfig", kubeconfig, "--config", config, "--address",
            "127.0.0.1", "--metrics-port", str(self.scheduler_metrics_port)))
        for spec in self.node_specs:
            self._start_node(spec, kubeconfig, config)

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
            with contextlib.suppress(ClusterError):
                self.cluster.request_json(
                    "DELETE", "/apis/admissionregistration.k8s.io/v1/"
                    f"mutatingwebhookconfigurations/{self.webhook_name}", "delete webhook")
            self._registered = False
        self.procs.stop()
        for node in self.nodes.values():
            node.kubelet.stop(delete_node=True)
        self.nodes = {}
        if not os.environ.get("VGPU_E2E_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- starting the pieces -----------------------------------------------------------------

    def _refuse_foreign_gpu_nodes(self) -> None:
        """Other GPU nodes with a live heartbeat would take this stack's pods and make
        every capacity assertion wrong: refuse to run rather than pass by luck."""
        now = dt.datetime.now(dt.UTC)
        expiry = vgpu_config.load(str(self.workdir / "config.yaml"),
                                  {}).node_heartbeat_expiry_seconds
        foreign = []
        for node in self.cluster.list("nodes").items:
            notes = (node.get("metadata") or {}).get("annotations") or {}
            if NODE_GPUS not in notes:
                continue
            with contextlib.suppress(Exception):
                beat = decode_time(notes.get(NODE_HEARTBEAT))
                if (now - beat).total_seconds() < expiry and \
                        decode_inventory(notes[NODE_GPUS]).devices:
                    foreign.append(node["metadata"]["name"])
        if foreign:
            raise AssertionError(f"GPU nodes with a live heartbeat already exist: {foreign}; "
                                 f"a test that leaves such nodes must delete them")

    def _write_config(self) -> dict[str, Any]:
        config: dict[str, Any] = yaml.safe_load(BASE_CONFIG.read_text())
        config.update(schedulerName=self.scheduler_name, **self._config_overrides)
        (self.workdir / "config.yaml").write_text(yaml.safe_dump(config))
        return config

    def _start_node(self, spec: NodeSpec, kubeconfig: str, config: str) -> None:
        kubelet = NodeKubelet(_connect(self.cp), spec.name, labels=spec.labels)
        node = SimNode(spec, kubelet, free_port() if self._agent_metrics else 0)
        self.nodes[spec.name] = node
        kubelet.start()
        devices = self.workdir / f"{spec.name}.devices.yaml"
        devices.write_text(yaml.safe_dump(spec.devices_file()))
        self.procs.start(f"nodeagent-{spec.name}", vgpu_command(
            "nodeagent", "--node-name", spec.name, "--fake-devices", str(devices),
            "--device-plugin-dir", kubelet.plugin_dir, "--kubeconfig", kubeconfig,
            "--config", config, "--metrics-port", str(node.metrics_port)))

    def _wait_node_ready(self, node: SimNode, timeout: float) -> None:
        """Registered with its kubelet, inventory published, devices in the Node's status."""
        split = int(self.config.get("deviceSplitCount", 10))
        want = len(node.spec.gpus) * split

        def ready() -> bool:
            self.procs.check_alive()
            obj = self.cluster.get("nodes", node.name)
            notes = obj["metadata"].get("annotations") or {}
            allocatable = (obj.get("status") or {}).get("allocatable") or {}
            return (NODE_GPUS in notes
                    and len(decode_inventory(notes[NODE_GPUS]).devices) == len(
                        node.spec.gpus)
                    and allocatable.get(node.kubelet.resource) == str(want))

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
            metrics = _get(f"http://127.0.0.1:{self.webhook_metrics_port}/metrics")
            found = re.search(r"^vgpu_webhook_inventory_gpus (\S+)$", metrics or "", re.M)
            return _get(f"http://127.0.0.1:{self.webhook_metrics_port}/readyz") is not None \
                and found is not None and float(found.group(1)) >= gpus

        wait_until("webhook ready with every node's GPUs", sees_every_gpu, timeout,
                   interval=0.2, context=self.logs)

    def registration(self, ca_pem: bytes) -> dict[str, Any]:
        doc: dict[str, Any] = yaml.safe_load(REGISTRATION.read_text())
        doc["metadata"]["name"] = self.webhook_name
        for hook in doc["webhooks"]:
            hook["clientConfig"] = {"url": f"https://localhost:{self.webhook_port}/mutate",
                                    "caBundle": base64.b64encode(ca_pem).decode()}
            hook.pop("matchConditions", None)
            hook["namespaceSelector"]["matchExpressions"].append(
                {"key": STACK_LABEL, "operator": "In", "values": [self.tag]})
        return doc

    def _register_webhook(self, ca_crt: Path) -> None:
        self.cluster.request_json(
            "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            "register the webhook", body=self.registration(ca_crt.read_bytes()))
        self._registered = True

    def _wait_scheduler_ready(self, timeout: float) -> None:
        def ready() -> bool:
            self.procs.check_alive()
            return _get(f"http://127.0.0.1:{self.scheduler_metrics_port}/readyz") is not None

        wait_until("scheduler ready", ready, timeout, interval=0.2, context=self.logs)

    # -- namespaces and pods -----------------------------------------------------------------

    def namespace(self, name: str) -> str:
        """A namespace whose pods this stack's webhook sees."""
        self.cp.ensure_namespace(name)
        self.cluster.request_json(
            "PATCH", f"/api/v1/namespaces/{quote(name)}", f"label namespace {name}",
            body={"metadata": {"labels": {STACK_LABEL: self.tag, NAME_LABEL: name}}},
            content_type="application/merge-patch+json")
        return name

    def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> Obj:
        body = json.loads(json.dumps(pod))
        body.setdefault("metadata", {})["namespace"] = namespace
        body.setdefault("spec", {}).setdefault("automountServiceAccountToken", False)
        return self.cluster.create("pods", body)

    def pod(self, namespace: str, name: str) -> Obj:
        return self.cluster.get("pods", name, namespace)

    def pods(self, namespace: str) -> list[Obj]:
        return self.cluster.list("pods", Selector(namespace=namespace)).items

    def wait_pod(self, namespace: str, name: str, what: str, check: Callable[[Obj], bool],
                 timeout: float = 30.0) -> Obj:
        last: dict[str, Obj] = {}

        def probe() -> Obj | None:
            self.procs.check_alive()
            with contextlib.suppress(NotFoundError):
                last["pod"] = self.pod(namespace, name)
                return last["pod"] if check(last["pod"]) else None
            return None

        return wait_until(f"pod {namespace}/{name} {what}", probe, timeout, interval=0.15,
                          context=lambda: f"pod: {json.dumps(last.get('pod'))[:3000]}\n"
                                          f"events: {self.events(namespace, name)}")

    def wait_allocated(self, namespace: str, name: str, timeout: float = 30.0) -> Obj:
        """Bound, admitted by its node's kubelet (running), and ``bind-phase: success``."""
        return self.wait_pod(namespace, name, "allocated (bind-phase success, running)",
                             allocated, timeout)

    def admission(self, pod: Obj, timeout: float = 10.0) -> Admission:
        node = pod["spec"]["nodeName"]
        return self.nodes[node].kubelet.wait_admission(key_of(pod), timeout)

    def events(self, namespace: str, name: str) -> list[Obj]:
        answer = self.cluster.request_json(
            "GET", f"/api/v1/namespaces/{quote(namespace)}/events", "list events",
            query=[("fieldSelector", f"involvedObject.name={name}")])
        items: list[Obj] = answer.get("items") or []
        return items

    def delete_pod(self, namespace: str, name: str) -> None:
        """A plain delete (default grace period): a bound pod goes away once its node's
        kubelet finishes it, as on a real node."""
        self.cluster.delete("pods", name, namespace)

    def clear(self, namespace: str, timeout: float = 30.0) -> None:
        """Delete every pod of ``namespace`` and wait until they are gone."""
        self.cluster.request_json("DELETE", f"/api/v1/namespaces/{quote(namespace)}/pods",
                                  "delete pods")
        wait_until(f"every pod of {namespace} gone", lambda: not self.pods(namespace),
                   timeout, interval=0.2, context=self.logs)

    def create(self, path: str, obj: Mapping[str, Any]) -> Obj:
        """POST any object (a Deployment, a ReplicaSet) to its collection ``path``."""
        return self.cluster.request_json("POST", path, f"create {path}", body=dict(obj))

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (or ``uncordon``)."""
        self.cluster.request_json("PATCH", f"/api/v1/nodes/{quote(node)}", f"cordon {node}",
                                  body={"spec": {"unschedulable": unschedulable}},
                                  content_type="application/merge-patch+json")

    # -- diagnostics -------------------------------------------------------------------------

    def logs(self, lines: int = 60) -> str:
        kubelets = "\n".join(
            f"----- kubelet {n.name}: admitted {sorted(n.kubelet.admissions)}, "
            f"errors {n.kubelet.errors}, held {n.kubelet.held_devices()}"
            for n in self.nodes.values())
        return f"{self.procs.logs(lines)}\n{kubelets}"


def bind_phase(pod: Obj) -> str | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(BIND_PHASE)
    return str(value) if value is not None else None


def allocated(pod: Obj) -> bool:
    """``bind-phase: success`` and running. The agent's phase patch and the stand-in
    kubelet's status patch both follow Allocate, in either order."""
    return bind_phase(pod) == PHASE_SUCCESS and (pod.get("status") or {}).get(
        "phase") == "Running"


def _connect(cp: ControlPlane) -> KubeCluster:
    cluster = connect(str(cp.kubeconfig))
    assert cluster is not None
    return cluster


def _get(url: str) -> str | None:
    """The body of a 200 answer, else None."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return str(resp.read().decode()) if resp.status == 200 else None
    except OSError:
        return None


@contextlib.contextmanager
def full_stack(control_plane: ControlPlane, nodes: Sequence[NodeSpec],
               **kwargs: Any) -> Iterator[FullStack]:
    with FullStack(control_plane, nodes, **kwargs) as stack:
        yield stack
