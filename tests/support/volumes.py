"""Storage objects in API shape, and a fake of what completes a volume binding.

No controller-manager or CSI provisioner runs in the tests (in-memory or on the e2e API
server), so :class:`FakeProvisioner` plays both: when the scheduler names a node on a
claim (``volume.kubernetes.io/selected-node``) it creates a PV reachable from that node
and binds claim and PV, as an external provisioner and the PV controller would; when the
scheduler pre-binds a static PV to a claim (``spec.claimRef``) it completes the binding.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vgpu import builders
from vgpu.cluster.port import ClusterPort, Obj, Selector
from vgpu.errors import ClusterError
from vgpu_scheduler.plugins.helper.volume_objects import BIND_COMPLETED, SELECTED_NODE

WFFC = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
PROVISIONER = "csi.example.com"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def storage_class(name: str, mode: str | None = WFFC, provisioner: str = PROVISIONER,
                  topologies: Sequence[Mapping[str, Sequence[str]]] = ()) -> Obj:
    obj: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": name}, "provisioner": provisioner}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    if topologies:
        obj["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in t.items()]}
            for t in topologies]
    return obj


def node_affinity(labels: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": k, "operator": "In", "values": list(v)} for k, v in labels.items()]}]}}


def pv(name: str, cls: str = "", *, capacity: str = "10Gi",
       modes: Sequence[str] = ("ReadWriteOnce",), phase: str | None = "Available",
       on: Mapping[str, Sequence[str]] | None = None, labels: Mapping[str, str] | None = None,
       claim: Obj | None = None, csi: tuple[str, str] | None = None,
       volume_mode: str | None = None, **spec: Any) -> Obj:
    """A PersistentVolume; ``on`` is its required node affinity (label → values)."""
    body: dict[str, Any] = {"capacity": {"storage": capacity}, "accessModes": list(modes),
                            "storageClassName": cls, **spec}
    if csi is not None:
        body["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        body.setdefault("hostPath", {"path": f"/mnt/{name}"})
    if on:
        body["nodeAffinity"] = node_affinity(on)
    if volume_mode:
        body["volumeMode"] = volume_mode
    if claim is not None:
        meta = claim["metadata"]
        body["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                            "namespace": meta.get("namespace", "default"),
                            "name": meta["name"], "uid": meta.get("uid", "")}
    obj: Obj = {"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "labels": dict(labels or {})}, "spec": body}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def pvc(name: str, cls: str | None = "", *, request: str = "1Gi",
        modes: Sequence[str] = ("ReadWriteOnce",), namespace: str = "default",
        volume: str | None = None, bound: bool = False, phase: str | None = None,
        annotations: Mapping[str, str] | None = None, **spec: Any) -> Obj:
    """A claim; ``volume`` names its PV, ``bound`` marks the binding complete."""
    body: dict[str, Any] = {"accessModes": list(modes),
                            "resources": {"requests": {"storage": request}}, **spec}
    if cls is not None:
        body["storageClassName"] = cls
    if volume is not None:
        body["volumeName"] = volume
    notes = dict(annotations or {})
    if bound:
        notes[BIND_COMPLETED] = "yes"
    obj: Obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": namespace, "annotations": notes},
                "spec": body}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def claim_pod(name: str, *claims: str, ephemeral: Sequence[str] = (),
              namespace: str = "default", **kw: Any) -> Obj:
    """A GPU pod mounting ``claims`` (and ephemeral volumes named ``ephemeral``)."""
    volumes: list[dict[str, Any]] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
        for i, c in enumerate(claims)]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
                for v in ephemeral]
    return builders.pod(name, namespace=namespace, volumes=volumes, **kw)


def owned_by(claim: Obj, pod: Obj) -> Obj:
    claim["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
        "uid": pod["metadata"].get("uid", ""), "controller": True}]
    return claim


Topology = Callable[[str], Mapping[str, Sequence[str]]]


class FakeProvisioner:
    """A thread that provisions and binds claims as the scheduler asks (see the module
    docstring). ``topology(node)`` is the node affinity of the PVs it creates (default:
    that node's hostname); a node in ``refuse`` gets the annotation removed instead, as a
    provisioner that cannot provision there does."""

    def __init__(self, port: ClusterPort, namespace: str = "default", *,
                 topology: Topology | None = None, refuse: Sequence[str] = (),
                 period: float = 0.02) -> None:
        self.port = port
        self.namespace = namespace
        self.topology = topology or (lambda node: {HOSTNAME: [node]})
        self.refuse = set(refuse)
        self.period = period
        self.provisioned: dict[str, str] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-provisioner")

    def __enter__(self) -> FakeProvisioner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.step()
            except ClusterError as exc:  # a lost race: the next round sees the new state
                self.errors.append(str(exc))

    def step(self) -> None:
        claims = self.port.list("persistentvolumeclaims",
                                Selector(namespace=self.namespace)).items
        volumes = {v["metadata"]["name"]: v for v in self.port.list("persistentvolumes").items}
        for claim in claims:
            meta, spec = claim["metadata"], claim["spec"]
            if spec.get("volumeName") or BIND_COMPLETED in (meta.get("annotations") or {}):
                continue
            pre_bound = [v for v in volumes.values()
                         if (v["spec"].get("claimRef") or {}).get("uid") == meta.get("uid")]
            node = (meta.get("annotations") or {}).get(SELECTED_NODE)
            if pre_bound:
                self._bind(claim, pre_bound[0]["metadata"]["name"])
            elif node in self.refuse:
                self.port.patch_annotations("persistentvolumeclaims", meta["name"],
                                            {SELECTED_NODE: None}, self.namespace)
            elif node is not None:
                self._provision(claim, node)

    def _provision(self, claim: Obj, node: str) -> None:
        meta, spec = claim["metadata"], claim["spec"]
        name = f"pvc-{uuid.uuid4().hex[:12]}"
        request = spec["resources"]["requests"]["storage"]
        self.port.create("persistentvolumes", pv(
            name, spec.get("storageClassName", ""), capacity=request,
            modes=spec.get("accessModes") or ("ReadWriteOnce",), phase=None,
            on=self.topology(node), claim=claim, csi=(PROVISIONER, name)))
        self.provisioned[meta["name"]] = name
        self._bind(claim, name)

    def _bind(self, claim: Obj, volume: str) -> None:
        claim = self.port.get("persistentvolumeclaims", claim["metadata"]["name"],
                              self.namespace)
        claim["spec"]["volumeName"] = volume
        claim["metadata"].setdefault("annotations", {})[BIND_COMPLETED] = "yes"
        self.port.replace("persistentvolumeclaims", claim)
