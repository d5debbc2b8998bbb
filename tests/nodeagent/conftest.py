"""Fixtures: a node agent on the fake backend, a memory cluster and a kubelet stand-in.

Also what the agent tests read back: a pod's bind phase, and the environment an
Allocate answer gives a container.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.kubelet import KubeletStandIn, device_plugin_dir, short_tempdir
from tests.support.podresources import PodResourcesStandIn
from vgpu.annotations import BIND_PHASE, BIND_REASON
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu_nodeagent.agent import NodeAgent
from vgpu_nodeagent.devices.discovery import Discovery
from vgpu_nodeagent.devices.fake import FakeDiscovery
from vgpu_nodeagent.options import Options
from vgpu_nodeagent.proto import api_pb2

NODE = "node-1"
GPU0 = "GPU-00000000-0000-0000-0000-000000000000"
GPU1 = "GPU-11111111-1111-1111-1111-111111111111"
GPU2 = "GPU-22222222-2222-2222-2222-222222222222"


def gpu(uuid: str, index: int, *, memory: int = 40960, numa: int = 0,
        **extra: Any) -> dict[str, Any]:
    return {"uuid": uuid, "index": index, "model": "NVIDIA A100-SXM4-40GB",
            "memory_mib": memory, "numa": numa, **extra}


DEFAULT_GPUS = [gpu(GPU0, 0, numa=0, memory_used_mib=1024, utilization=37),
                gpu(GPU1, 1, numa=1), gpu(GPU2, 2, numa=1)]


def write_devices(path: str, devices: Sequence[Mapping[str, Any]]) -> None:
    # Write and rename, as an operator's tool would, so a reader never sees half a file.
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"devices": list(devices)}, handle)
    os.replace(tmp, path)


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout}s")
        time.sleep(0.01)


@dataclass
class Env:
    dir: str
    devices_file: str
    cluster: MemoryCluster
    kubelet: KubeletStandIn
    agent: NodeAgent
    config: Config


def small_config(**nodeagent: Any) -> Config:
    base = Config()
    # No pod-resources check unless a test serves the kubelet's socket.
    settings: dict[str, Any] = {"allocate_wait_seconds": 0.3, "heartbeat_seconds": 1.0,
                                "pod_resources_socket": "", **nodeagent}
    section = dataclasses.replace(base.nodeagent, **settings)
    return dataclasses.replace(base, nodeagent=section)


@pytest.fixture
def make_env() -> Iterator[Callable[..., Env]]:
    """Build an agent (on the fake backend and a memory cluster) and its kubelet."""
    stack: list[tuple[Any, ...]] = []

    def build(config: Config | None = None, *, gpus: Sequence[Mapping[str, Any]] = DEFAULT_GPUS,
              cluster: MemoryCluster | None = None, start_kubelet: bool = True,
              split: int | None = None, discovery: Discovery | None = None,
              proc_root: str = "/proc") -> Env:
        ctx = device_plugin_dir()
        folder = ctx.__enter__()
        cfg = config or small_config()
        cfg = dataclasses.replace(cfg, nodeagent=dataclasses.replace(
            cfg.nodeagent, device_plugin_dir=folder))
        if split is not None:
            cfg = dataclasses.replace(cfg, device_split_count=split)
        devices_file = os.path.join(folder, "gpus.json")
        write_devices(devices_file, gpus)
        memory = cluster or MemoryCluster()
        if cluster is None:
            memory.create("nodes", {"metadata": {"name": NODE}})
        kubelet = KubeletStandIn(folder)
        if start_kubelet:
            kubelet.start()
        agent = NodeAgent(cfg, discovery or FakeDiscovery(devices_file), memory,
                          Options(node_name=NODE, metrics_port=0, metrics_host="127.0.0.1",
                                  poll_seconds=0.05, watch_timeout=0.2,
                                  proc_root=proc_root))
        stack.append((ctx, kubelet, agent))
        agent.start()
        return Env(folder, devices_file, memory, kubelet, agent, cfg)

    yield build
    for ctx, kubelet, agent in reversed(stack):
        agent.stop()
        kubelet.stop()
        ctx.__exit__(None, None, None)


def phase(env: Env, name: str) -> tuple[str | None, str | None]:
    annotations = env.cluster.get("pods", name, "default")["metadata"].get("annotations", {})
    return annotations.get(BIND_PHASE), annotations.get(BIND_REASON)


def wait_phase(env: Env, name: str, expected: str) -> str | None:
    wait_until(lambda: phase(env, name)[0] == expected, what=f"{name} phase {expected}")
    return phase(env, name)[1]


def envs(response: api_pb2.ContainerAllocateResponse) -> dict[str, str]:
    return dict(response.envs)


@pytest.fixture
def stand_in() -> Iterator[PodResourcesStandIn]:
    folder = short_tempdir("pr")
    server = PodResourcesStandIn(os.path.join(folder, "kubelet.sock")).start()
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)
