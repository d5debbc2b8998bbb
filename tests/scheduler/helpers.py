"""Shared test helpers: a fake clock and a Handle without a host."""

from __future__ import annotations

from collections.abc import Callable

from vgpu.cluster.port import ClusterPort, Kind, Obj, key_of
from vgpu.config import Config
from vgpu_scheduler.framework.nodeinfo import NodeInfo


class FakeClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeLister:
    """A lister over objects a test puts in."""

    def __init__(self, objects: list[Obj] | None = None) -> None:
        self.objects = {key_of(o): o for o in objects or ()}

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def items(self) -> list[Obj]:
        return list(self.objects.values())


class FakeHandle:
    def __init__(self, config: Config | None = None, clock: FakeClock | None = None) -> None:
        self._config = config or Config()
        self.clock = clock or FakeClock()
        self.allowed: list[tuple[str, str]] = []
        self.rejected: list[tuple[str, str, str]] = []
        self.handlers: list[Callable[[Obj | None, Obj | None], None]] = []
        self.listers: dict[str, FakeLister] = {}

    @property
    def config(self) -> Config:
        return self._config

    @property
    def cluster(self) -> ClusterPort | None:
        return None

    def now(self) -> float:
        return self.clock()

    def node_info(self, name: str) -> NodeInfo | None:
        return None

    def allow(self, pod_key: str, plugin: str) -> None:
        self.allowed.append((pod_key, plugin))

    def reject(self, pod_key: str, plugin: str, reason: str) -> None:
        self.rejected.append((pod_key, plugin, reason))

    def on_pod_event(self, handler: Callable[[Obj | None, Obj | None], None]) -> None:
        self.handlers.append(handler)

    def lister(self, kind: Kind) -> FakeLister:
        return self.listers.setdefault(kind, FakeLister())
