"""A Handle whose listers serve fixed storage objects, and nodes and pods to filter, for
the volume plugins' unit tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tests.scheduler.helpers import FakeHandle
from vgpu import builders
from vgpu.cluster.port import ClusterPort, Kind, Obj, key_of
from vgpu.config import Config
from vgpu_scheduler.framework import podinfo
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod, parse_node
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot

PLURAL: Mapping[str, Kind] = {
    "PersistentVolume": "persistentvolumes", "PersistentVolumeClaim": "persistentvolumeclaims",
    "StorageClass": "storageclasses", "CSINode": "csinodes"}


class Listed:
    """A Lister over objects given up front."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def items(self) -> list[Obj]:
        return list(self.objects.values())


def uid(obj: Obj) -> Obj:
    """Give a claim (or pod) the UID the API server would."""
    obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
    return obj


class StorageHandle(FakeHandle):
    def __init__(self, *objects: Obj, config: Config | None = None,
                 cluster: ClusterPort | None = None,
                 nodes: Iterable[NodeInfo] = ()) -> None:
        super().__init__(config)
        self.listers: dict[str, Listed] = {kind: Listed() for kind in PLURAL.values()}
        self._cluster = cluster
        self.nodes = {n.name: n for n in nodes}
        for obj in objects:
            self.put(obj)

    def put(self, obj: Obj) -> None:
        if obj["kind"] == "PersistentVolumeClaim":
            uid(obj)
            obj["metadata"].setdefault("namespace", "default")
        self.listers[PLURAL[obj["kind"]]].objects[key_of(obj)] = obj

    def lister(self, kind: Kind) -> Listed:
        return self.listers[kind]

    @property
    def cluster(self) -> ClusterPort | None:
        return self._cluster

    def node_info(self, name: str) -> NodeInfo | None:
        return self.nodes.get(name)


def pod(obj: Obj) -> PodInfo:
    return podinfo.parse(uid(obj), Config())


def node(name: str, labels: Mapping[str, str] | None = None, *, pods: Iterable[Obj] = (),
         **kw: Any) -> NodeInfo:
    static = parse_node(builders.node(name, labels=labels, **kw))
    infos = [pod(p) for p in pods]
    return NodeInfo.of(static, 1.0, {i.pod_id: NodePod(i) for i in infos})


def snapshot(*nodes: NodeInfo) -> Snapshot:
    snap = Snapshot()
    for n in nodes:
        snap.set(n)
    return snap


def pre_filtered(plugin: Any, info: PodInfo, *nodes: NodeInfo) -> tuple[CycleState, Any]:
    """Run the plugin's PreFilter; (the cycle state, its status)."""
    state = CycleState(0.0)
    _, status = plugin.pre_filter(state, info, snapshot(*nodes))
    return state, status
