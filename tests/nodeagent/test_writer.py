from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import NodeInventory, decode_inventory
from vgpu.devices import Device
from vgpu.errors import ConflictError
from vgpu_nodeagent.devices.inventory import InventoryPublisher

INV = NodeInventory(devices=(Device("GPU-a", 0, "A100", 40960),))
INV2 = NodeInventory(devices=(Device("GPU-a", 0, "A100", 40960, healthy=False),))
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Flaky(MemoryCluster):
    """Fails the first ``failures`` annotation patches with a conflict."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.patches = 0
        self.through_status: bool | None = None

    def patch_annotations(self, kind: Any, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None, resource_version: str | None = None,
                          *, uid: str = "", status: bool = False,
                          conditions: Any = ()) -> dict[str, Any]:
        self.patches += 1
        self.through_status = status
        if self.failures:
            self.failures -= 1
            raise ConflictError("the object has been modified")
        return super().patch_annotations(kind, name, annotations, namespace, resource_version,
                                         uid=uid, status=status, conditions=conditions)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def annotations(cluster: MemoryCluster) -> dict[str, str]:
    return dict(cluster.get("nodes", "n")["metadata"].get("annotations") or {})


def test_publishes_on_change_and_on_heartbeat() -> None:
    cluster = MemoryCluster()
    cluster.create("nodes", {"metadata": {"name": "n"}})
    clock = Clock()
    publisher = InventoryPublisher(cluster, "n", 30, now=lambda: T0, clock=clock)
    assert publisher.publish_due(INV)
    assert decode_inventory(annotations(cluster)[NODE_GPUS]) == INV
    assert annotations(cluster)[NODE_HEARTBEAT] == "2026-01-01T00:00:00.000000Z"
    clock.now = 10
    assert not publisher.publish_due(INV)  # nothing new, heartbeat not due
    assert publisher.publish_due(INV2)  # a change is written at once
    assert decode_inventory(annotations(cluster)[NODE_GPUS]) == INV2
    clock.now = 39
    assert not publisher.publish_due(INV2)
    clock.now = 40
    assert publisher.publish_due(INV2)  # heartbeat due
    assert publisher.writes == 3


def test_failed_writes_are_retried_after_a_backoff() -> None:
    cluster = Flaky(failures=2)
    cluster.create("nodes", {"metadata": {"name": "n"}})
    clock = Clock()
    publisher = InventoryPublisher(cluster, "n", 30, now=lambda: T0, clock=clock)
    assert not publisher.publish_due(INV)
    assert not publisher.publish_due(INV)  # backing off: no second attempt yet
    assert cluster.patches == 1
    clock.now = 0.5
    assert not publisher.publish_due(INV)
    clock.now = 1.5
    assert publisher.publish_due(INV)
    assert NODE_GPUS in annotations(cluster)


def test_missing_node_is_retried_not_fatal() -> None:
    cluster = MemoryCluster()
    clock = Clock()
    publisher = InventoryPublisher(cluster, "n", 30, now=lambda: T0, clock=clock)
    assert not publisher.publish_due(INV)
    cluster.create("nodes", {"metadata": {"name": "n"}})
    clock.now = 5
    assert publisher.publish_due(INV)


def test_without_a_cluster_nothing_is_written() -> None:
    publisher = InventoryPublisher(None, "n", 30)
    assert not publisher.publish_due(INV)
    assert publisher.writes == 0


def test_withdraw_removes_the_heartbeat_keeps_the_inventory_and_ends_publishing() -> None:
    cluster = MemoryCluster()
    cluster.create("nodes", {"metadata": {"name": "n"}})
    clock = Clock()
    publisher = InventoryPublisher(cluster, "n", 30, now=lambda: T0, clock=clock)
    assert publisher.publish_due(INV)
    publisher.withdraw()
    assert NODE_HEARTBEAT not in annotations(cluster)
    assert decode_inventory(annotations(cluster)[NODE_GPUS]) == INV
    clock.now = 60
    assert not publisher.publish_due(INV2)  # the agent's loop may still be running
    assert NODE_HEARTBEAT not in annotations(cluster)


def test_withdraw_writes_nothing_before_a_publish_and_survives_a_failed_write() -> None:
    cluster = Flaky(failures=1)
    cluster.create("nodes", {"metadata": {"name": "n"}})
    InventoryPublisher(cluster, "n", 30, now=lambda: T0).withdraw()
    assert cluster.patches == 0  # never published: nothing of ours to remove
    publisher = InventoryPublisher(cluster, "n", 30, now=lambda: T0)
    cluster.failures = 0
    assert publisher.publish_due(INV)
    cluster.failures = 1
    publisher.withdraw()  # logged; the heartbeat then expires by itself
    assert NODE_HEARTBEAT in annotations(cluster)
