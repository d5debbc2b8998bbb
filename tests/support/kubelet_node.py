"""The kubelet of one simulated node, on a real API server.

:class:`NodeKubelet` does what a kubelet does that vgpu depends on, and nothing else:

* registers its Node (labels, ``status.capacity``/``allocatable`` with CPU, memory, pods,
  a Ready condition) and keeps the device plugin's resource (``nvidia.com/gpu``) in that
  status at the count of healthy devices ListAndWatch reports, as the device manager does
  (0 once the plugin's stream ends, until it registers again);
* serves the device-plugin ``Registration`` socket (a :class:`KubeletStandIn`), so the
  node's real ``vgpu nodeagent`` registers with it;
* watches the pods bound to its node and admits each new one the kubelet's way: per GPU
  container, init containers first, GetPreferredAllocation over the free device IDs and
  then Allocate with the chosen ones; the pod then goes ``Running``, or ``Failed`` with
  the kubelet's ``UnexpectedAdmissionError`` when Allocate fails. Every outcome is kept in
  :attr:`NodeKubelet.admissions` for assertions;
* finishes a graceful deletion: a bound pod being deleted gets its devices back and is
  removed with a zero grace period, as the kubelet does once its containers stopped
  (without this a deleted pod would stay Terminating forever).

Pods are admitted one at a time, in watch order, like the kubelet's sync loop.
:meth:`NodeKubelet.paused` holds that loop, so that a test can see pods bound to the node
and not yet admitted (several GPU pods in flight at once).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import queue
import shutil
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import grpc

from tests.support.kubelet import KubeletStandIn, short_tempdir
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import Obj, Selector, key_of
from vgpu.errors import ClusterError, NotFoundError
from vgpu.kube.adapter import KubeCluster

MERGE_PATCH = "application/merge-patch+json"
#: Pod status merges conditions by type: the kubelet keeps those it does not own.
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ContainerGrant:
    """What the kubelet got back for one container's Allocate call."""

    device_ids: tuple[str, ...]
    envs: Mapping[str, str]
    mounts: tuple[tuple[str, str, bool], ...]


@dataclass(frozen=True)
class Admission:
    """The kubelet's admission of one pod: a grant per GPU container, or the error."""

    key: str
    uid: str
    containers: Mapping[str, ContainerGrant] = field(default_factory=dict)
    error: str | None = None


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def device_count(container: Mapping[str, Any], resource: str) -> int:
    """How many devices of ``resource`` a container gets: its limit (the kubelet requires
    extended-resource requests to equal limits, and takes limits when only those exist)."""
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(resource)
    if value is None:
        value = (resources.get("requests") or {}).get(resource)
    return int(value) if value is not None else 0


class NodeKubelet:
    def __init__(self, cluster: KubeCluster, name: str, *, labels: Mapping[str, str],
                 resource: str = "nvidia.com/gpu", plugin_dir: str | None = None,
                 cpu: str = "64", memory: str = "512Gi", pods: int = 110,
                 watch_timeout: float = 2.0) -> None:
        self.cluster = cluster
        self.name = name
        self.labels = dict(labels)
        self.resource = resource
        self.plugin_dir = plugin_dir or short_tempdir("vn")
        self._own_dir = plugin_dir is None
        self._capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
        self.plugin = KubeletStandIn(self.plugin_dir)
        self.informer = Informer(cluster, "pods", self._on_pod, Selector(node_name=name),
                                 watch_timeout=watch_timeout)
        self.admissions: dict[str, Admission] = {}
        self.errors: list[str] = []
        self._cond = threading.Condition()
        self._events: queue.Queue[tuple[Obj | None, Obj | None]] = queue.Queue()
        self._seen: set[str] = set()       # uids admitted or being admitted
        self._held: dict[str, list[str]] = {}  # uid -> device IDs it holds
        self._advertised = -1
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------

    def register_node(self) -> None:
        """Create the Node as a starting kubelet does, with its status."""
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": self.labels}}
        with contextlib.suppress(ClusterError):  # already there: a restarted kubelet
            self.cluster.create("nodes", node)
        self._patch_node_status(0, ready=True)

    def start(self) -> None:
        self.register_node()
        self.plugin.start()
        self._threads = [self.informer.start(self._stop, name=f"kubelet-pods-{self.name}"),
                         threading.Thread(target=self._work, daemon=True,
                                          name=f"kubelet-{self.name}")]
        self._threads[1].start()

    def stop(self, delete_node: bool = True) -> None:
        """Stop every thread (bounded by the watch timeout), the socket, and the Node."""
        self._stop.set()
        self._events.put((None, None))
        for thread in self._threads:
            thread.join(timeout=10)
        self.plugin.stop()
        if delete_node:
            with contextlib.suppress(ClusterError):
                self.cluster.delete("nodes", self.name)
        if self._own_dir:
            shutil.rmtree(self.plugin_dir, ignore_errors=True)

    def alive_threads(self) -> list[str]:
        return [t.name for t in self._threads if t.is_alive()]

    # -- the node's status -----------------------------------------------------------------

    def _patch_node_status(self, devices: int, *, ready: bool) -> None:
        resources = {**self._capacity, self.resource: str(devices)}
        status = {"capacity": resources, "allocatable": resources,
                  "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                {"type": "Hostname", "address": self.name}],
                  "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                  "reason": "KubeletReady", "message": "kubelet stand-in",
                                  "lastHeartbeatTime": _now(),
                                  "lastTransitionTime": _now()}]}
        self.cluster.request_json("PATCH", f"/api/v1/nodes/{quote(self.name)}/status",
                                  f"patch node {self.name} status", body={"status": status},
                                  content_type=MERGE_PATCH)

    def _sync_device_capacity(self) -> None:
        watch = self.plugin.watch
        if watch is None:
            return
        # A plugin whose ListAndWatch stream ended (its process died) has no healthy device
        # left: the kubelet's device manager sets the resource's allocatable to 0 then, and
        # back when the plugin registers again.
        healthy = 0 if watch.ended else len(watch.healthy_ids())
        if healthy != self._advertised:
            self._patch_node_status(healthy, ready=True)
            self._advertised = healthy

    # -- pods ------------------------------------------------------------------------------

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        self._events.put((old, new))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No pod is admitted (nor deleted) inside the block; those that arrived meanwhile
        are, in watch order, after it."""
        self._running.clear()
        try:
            yield
        finally:
            self._running.set()

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                old, new = self._events.get(timeout=0.5)
            except queue.Empty:
                old = new = None
            while not self._running.wait(0.2):
                if self._stop.is_set():
                    return
            try:
                self._sync_device_capacity()
                if new is not None:
                    self._handle(new)
                elif old is not None:
                    self._release(old)
            except Exception as exc:  # reported to the test through .errors, never silent
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _handle(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            self._release(pod)
            self._finish_deletion(pod)
            return
        phase = (pod.get("status") or {}).get("phase")
        if uid in self._seen or phase in TERMINAL:
            return
        self._seen.add(uid)
        admission = self._admit(pod)
        with self._cond:
            self.admissions[key_of(pod)] = admission
            self._cond.notify_all()
        self._set_pod_status(pod, admission)

    def _admit(self, pod: Obj) -> Admission:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        spec = pod.get("spec") or {}
        inits = [(c["name"], device_count(c, self.resource))
                 for c in spec.get("initContainers") or []]
        apps = [(c["name"], device_count(c, self.resource)) for c in spec.get("containers") or []]
        grants: dict[str, ContainerGrant] = {}
        if not any(n for _, n in [*inits, *apps]):
            return Admission(key_of(pod), uid)
        try:
            self.plugin.wait_registration(timeout=30)
            held: list[str] = []
            reusable: list[str] = []
            for is_init, (name, count) in [(True, c) for c in inits] + [(False, c) for c in apps]:
                if count == 0:
                    continue
                ids, response = self.plugin.admit_container(count, reusable)
                held.extend(i for i in ids if i not in held)
                if is_init:
                    reusable = list(dict.fromkeys([*reusable, *ids]))
                else:
                    reusable = [i for i in reusable if i not in ids]
                grants[name] = ContainerGrant(
                    tuple(ids), dict(response.envs),
                    tuple((m.container_path, m.host_path, m.read_only)
                          for m in response.mounts))
            self._held[uid] = held
            return Admission(key_of(pod), uid, grants)
        except (grpc.RpcError, RuntimeError, TimeoutError) as exc:
            # The kubelet keeps no devices of a pod it failed to admit.
            self.plugin.release([i for g in grants.values() for i in g.device_ids])
            details = exc.details() if isinstance(exc, grpc.RpcError) else str(exc)
            return Admission(key_of(pod), uid, grants, error=str(details))

    def _set_pod_status(self, pod: Obj, admission: Admission) -> None:
        meta = pod.get("metadata") or {}
        if admission.error is None:
            status: dict[str, Any] = {
                "phase": "Running", "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
                "startTime": _now(),
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": _now()}]}
        else:
            status = {"phase": "Failed", "reason": "UnexpectedAdmissionError",
                      "message": f"Allocate failed due to {admission.error}, which is "
                                 f"unexpected"}
        path = (f"/api/v1/namespaces/{quote(str(meta.get('namespace')))}/pods/"
                f"{quote(str(meta.get('name')))}/status")
        with contextlib.suppress(NotFoundError):
            self.cluster.request_json("PATCH", path, f"patch pod {key_of(pod)} status",
                                      body={"status": status}, content_type=STRATEGIC_PATCH)

    def _release(self, pod: Obj) -> None:
        uid = str((pod.get("metadata") or {}).get("uid"))
        self.plugin.release(self._held.pop(uid, []))

    def _finish_deletion(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        path = f"/api/v1/namespaces/{quote(str(meta.get('namespace')))}/pods/" \
               f"{quote(str(meta.get('name')))}"
        with contextlib.suppress(NotFoundError):
            self.cluster.request_json(
                "DELETE", path, f"delete pod {key_of(pod)}",
                body={"gracePeriodSeconds": 0, "preconditions": {"uid": meta.get("uid")}})

    # -- for tests -------------------------------------------------------------------------

    def wait_admission(self, key: str, timeout: float = 30.0) -> Admission:
        """The admission of pod ``namespace/name`` once the kubelet made it."""
        with self._cond:
            if not self._cond.wait_for(lambda: key in self.admissions, timeout):
                raise TimeoutError(f"node {self.name}: pod {key} not admitted within "
                                   f"{timeout:g}s (admitted: {sorted(self.admissions)}; "
                                   f"errors: {self.errors})")
            return self.admissions[key]

    def held_devices(self) -> dict[str, list[str]]:
        return {uid: list(ids) for uid, ids in self._held.items()}
