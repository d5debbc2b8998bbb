"""The GPU types the webhook remembers (ConfigMap vgpu-gpu-types): written once learnt,
merged with what is there, read back through the watch, and a failing write tried again
after a back-off, never in a loop of requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.webhook.test_gpus import wait_until
from vgpu.cluster.memory import MemoryCluster
from vgpu.errors import ClusterError
from vgpu_webhook import remembered

NS = "vgpu-system"
T4 = ("Tesla T4", 15360)
A100 = ("NVIDIA A100-SXM4-40GB", 40960)


@pytest.mark.parametrize(("data", "kinds"), [
    ({"a": "15360 Tesla T4"}, {T4}),
    ({"a": "15360 Tesla T4", "b": "x Tesla T4", "c": "15360", "d": "0 T", "e": "99999999 T"},
     {T4}),
    ({}, set()),
])
def test_decode(data: dict[str, str], kinds: set[tuple[str, int]]) -> None:
    assert remembered.decode({"data": data}) == kinds
    assert remembered.decode(None) == frozenset()


def test_encode_reads_back() -> None:
    assert remembered.decode({"data": remembered.encode({T4, A100})}) == {T4, A100}


class Refusing(MemoryCluster):
    """A cluster whose writes of ConfigMaps fail, as without the namespace or the right."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def create(self, kind: Any, obj: Any) -> Any:
        if kind == "configmaps":
            self.writes += 1
            raise ClusterError("namespaces \"vgpu-system\" not found")
        return super().create(kind, obj)


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_learnt_types_are_written_merged_and_read_back(stop: threading.Event) -> None:
    cluster = MemoryCluster()
    store = remembered.start(cluster, NS, stop)
    store.learn(frozenset({T4}))
    wait_until(lambda: store.known == {T4}, 10)
    store.learn(frozenset({A100}))
    wait_until(lambda: store.known == {T4, A100}, 10)
    assert remembered.decode(cluster.get("configmaps", remembered.NAME, NS)) == {T4, A100}
    # Known types write nothing again.
    version = cluster.get("configmaps", remembered.NAME, NS)["metadata"]["resourceVersion"]
    store.learn(frozenset({T4}))
    assert cluster.get("configmaps", remembered.NAME,
                       NS)["metadata"]["resourceVersion"] == version


def test_a_failing_write_backs_off(stop: threading.Event) -> None:
    cluster = Refusing()
    store = remembered.RememberedTypes(cluster, NS, retry=0.2)
    thread = threading.Thread(target=store.run, args=(stop,), daemon=True)
    thread.start()
    store.learn(frozenset({T4}))
    wait_until(lambda: cluster.writes >= 2, 10)
    stop.wait(1.0)
    # 0.2, 0.4 then 0.8 s apart: a handful in the second, not a loop of hundreds.
    assert cluster.writes <= 4
    stop.set()
    thread.join(10)
