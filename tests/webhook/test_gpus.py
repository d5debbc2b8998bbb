"""The GPU view: inventories in, snapshots out; fed by a real informer on a memory cluster."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.webhook.pods import A100, T4, admit, ctr, node_inventory, pod
from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT, GpuSelector
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import encode_inventory
from vgpu_webhook.gpus import ClusterGpus, GpuView
from vgpu_webhook.watch import no_cluster, watch_nodes


def node(name: str, inventory: str | None, heartbeat: str = "2026-01-01T00:00:00Z"
         ) -> dict[str, Any]:
    annotations = {NODE_HEARTBEAT: heartbeat}
    if inventory is not None:
        annotations[NODE_GPUS] = inventory
    return {"metadata": {"name": name, "annotations": annotations}}


A100S = encode_inventory(node_inventory(A100, 40960, 4, "a"))
T4S = encode_inventory(node_inventory(T4, 15360, 2, "t"))


def test_snapshot_groups_gpus_by_kind() -> None:
    view = GpuView()
    view.upsert(node("a", A100S))
    view.upsert(node("t", T4S))
    view.upsert(node("cpu-only", None))
    snap = view.snapshot
    assert snap.nodes == 2 and snap.gpus == 6 and snap.max_gpus_per_node == 4
    assert [(k.model, k.memory_mib, len(k.uuids)) for k in snap.kinds] == [
        (A100, 40960, 4), (T4, 15360, 2)]


@pytest.mark.parametrize(("selector", "models"), [
    (GpuSelector(), {A100, T4}),
    (GpuSelector(use_types=("t4",)), {T4}),
    (GpuSelector(nouse_types=("A100",)), {T4}),
    (GpuSelector(use_uuids=("GPU-a-2",)), {A100}),
    (GpuSelector(use_uuids=("GPU-nope",)), set()),
    (GpuSelector(use_uuids=("GPU-a-2",), nouse_uuids=("GPU-a-2",)), set()),
    (GpuSelector(nouse_uuids=("GPU-t-0", "GPU-t-1")), {A100}),
    (GpuSelector(nouse_uuids=("GPU-t-0",)), {A100, T4}),
    (GpuSelector(use_types=("A100",), use_uuids=("GPU-t-0",)), set()),
])
def test_candidates_follow_the_selector(selector: GpuSelector, models: set[str]) -> None:
    view = GpuView()
    view.upsert(node("a", A100S))
    view.upsert(node("t", T4S))
    assert {k.model for k in view.snapshot.candidates(selector)} == models


def test_heartbeats_do_not_rebuild_and_changes_do() -> None:
    view = GpuView()
    view.upsert(node("a", A100S))
    first = view.snapshot
    view.upsert(node("a", A100S, heartbeat="2026-01-01T00:00:30Z"))
    assert view.snapshot is first
    view.upsert(node("a", T4S))
    assert view.snapshot.kinds[0].model == T4
    view.upsert(node("a", None))
    assert not view.snapshot.known
    view.upsert(node("a", A100S))
    view.remove(node("a", None))
    assert view.snapshot == ClusterGpus()
    view.remove(node("never-seen", None))


def test_a_broken_inventory_is_ignored_not_fatal() -> None:
    view = GpuView()
    view.upsert(node("a", A100S))
    view.upsert(node("b", '{"version": 1, "devices": [{"uuid": 3}]}'))
    view.upsert(node("c", "not json"))
    view.upsert({"metadata": {"annotations": {NODE_GPUS: A100S}}})  # no name
    view.upsert({"metadata": "junk"})
    assert view.snapshot.nodes == 1
    # A node whose agent fixes its annotation comes back.
    view.upsert(node("b", T4S))
    assert view.snapshot.nodes == 2


def test_informer_handler_signature() -> None:
    view = GpuView()
    view.handle(None, node("a", A100S))
    view.handle(node("a", A100S), node("a", T4S))
    assert view.snapshot.kinds[0].model == T4
    view.handle(node("a", T4S), None)
    assert not view.snapshot.known


def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_watch_nodes_on_a_memory_cluster() -> None:
    cluster = MemoryCluster()
    cluster.create("nodes", node("a", A100S))
    stop = threading.Event()
    try:
        view = watch_nodes(cluster, stop)
        wait_until(lambda: view.synced)
        assert view.snapshot.gpus == 4
        cluster.create("nodes", node("t", T4S))
        wait_until(lambda: view.snapshot.gpus == 6)
        cluster.patch_annotations("nodes", "a", {NODE_GPUS: None})
        wait_until(lambda: view.snapshot.gpus == 2)
        cluster.delete("nodes", "t")
        wait_until(lambda: not view.snapshot.known)
    finally:
        stop.set()


def test_no_cluster_is_ready_and_empty() -> None:
    view = no_cluster()
    assert view.synced and not view.snapshot.known


def test_two_models_of_one_size_resolve() -> None:
    # Homogeneity is about the memory size, not the model.
    gpus = ClusterGpus.from_inventories([node_inventory(A100, 40960, 2, "x"),
                                         node_inventory("NVIDIA A40", 40960, 2, "y")])
    _, patched = admit(pod(ctr("c", {"nvidia.com/gpumem-percentage": "50"})), gpus)
    assert patched["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] == \
        "20480"


def test_a_node_created_again_smaller_under_its_name_replaces_the_first() -> None:
    """Told as an update from one uid to the other (or as delete + add: issue 50), the
    view holds the second node's GPUs only."""
    first = {**node("a", A100S), "metadata": {**node("a", A100S)["metadata"], "uid": "1"}}
    second = {**node("a", T4S), "metadata": {**node("a", T4S)["metadata"], "uid": "2"}}
    split, whole = GpuView(), GpuView()
    for view in (split, whole):
        view.handle(None, first)
    whole.handle(first, second)
    split.handle(first, None)
    split.handle(None, second)
    assert split.snapshot == whole.snapshot
    assert [k.model for k in whole.snapshot.kinds] == [T4] and whole.snapshot.gpus == 2
