"""The usage watchdog in a running agent: NVML processes from the fake device file, their
cgroups from a stand-in /proc, grants from the pods; events, metrics, evictions."""

from __future__ import annotations

import dataclasses
import urllib.request
from pathlib import Path
from typing import Any

from tests.nodeagent.conftest import (
    GPU0,
    GPU1,
    NODE,
    gpu,
    small_config,
    wait_until,
    write_devices,
)
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu.annotations import BIND_PHASE, PHASE_SUCCESS
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, from_mapping
from vgpu.errors import EvictionRefusedError
from vgpu_nodeagent.agent import NodeAgent
from vgpu_nodeagent.devices.fake import FakeDiscovery
from vgpu_nodeagent.options import Options

CID = "ab" * 32
OTHER = "cd" * 32


def setup(tmp_path: Path, config: Config, processes: list[dict[str, Any]]
          ) -> tuple[NodeAgent, MemoryCluster, str]:
    cluster = MemoryCluster()
    cluster.create("nodes", {"metadata": {"name": NODE}})
    created = bind_assigned(cluster, pod("p", [container("main", 1, mem=4096, cores=30)]),
                            NODE, {"main": slices((GPU1, 4096, 30))})
    uid = created["metadata"]["uid"]
    cluster.patch_annotations("pods", "p", {BIND_PHASE: PHASE_SUCCESS}, "default")
    cluster.patch_status("pods", "p", {"phase": "Running", "containerStatuses": [
        {"name": "main", "containerID": f"containerd://{CID}", "ready": True}]}, "default")
    proc = tmp_path / "proc"
    for pid, text in ((100, f"0::/kubepods/burstable/pod{uid}/{CID}"),
                      (200, "0::/user.slice/user-1000.slice/session-1.scope")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(text + "\n")
    folder = str(tmp_path / "dp")
    Path(folder).mkdir()
    devices = str(tmp_path / "gpus.json")
    write_devices(devices, [gpu(GPU0, 0, processes=[{"pid": 200, "used_memory_mib": 700}]),
                            gpu(GPU1, 1, processes=processes)])
    config = dataclasses.replace(config, nodeagent=dataclasses.replace(
        small_config().nodeagent, device_plugin_dir=folder))
    agent = NodeAgent(config, FakeDiscovery(devices), cluster,
                      Options(node_name=NODE, metrics_port=None, proc_root=str(proc)))
    return agent, cluster, uid


def watchdog_config(action: str = "report") -> Config:
    # A long interval: the test drives the rounds itself.
    return from_mapping({"isolation": {"watchdog": {"intervalSeconds": 3600,
                                                    "action": action}}})


def pods_of(cluster: MemoryCluster) -> Any:
    return lambda: cluster.list("pods").items


def test_within_the_grant_is_quiet_and_measured(tmp_path: Path) -> None:
    agent, cluster, _ = setup(tmp_path, watchdog_config(),
                              [{"pid": 100, "used_memory_mib": 3000}])
    agent.watchdog._pods = pods_of(cluster)
    result = agent.watchdog.check()
    assert [(u.container, u.used_mib, u.granted_mib) for u in result.uses] == \
        [("main", 3000, 4096)]
    assert result.breaches == ()
    assert [(f.pid, f.owner) for f in result.foreign] == [(200, None)]
    assert not [e for e in cluster.events(name="p") if e.reason == "GPUMemoryOverGrant"]
    text = "\n".join(str(m) for m in agent.watchdog.families())
    assert "3145728000" in text  # 3000 MiB used, in bytes


def test_a_breach_is_reported_once_with_an_event(tmp_path: Path) -> None:
    agent, cluster, _ = setup(tmp_path, watchdog_config(),
                              [{"pid": 100, "used_memory_mib": 5120}])
    agent.watchdog._pods = pods_of(cluster)
    agent.watchdog.check()
    agent.watchdog.check()
    (event,) = [e for e in cluster.events(name="p") if e.reason == "GPUMemoryOverGrant"]
    assert event.type == "Warning"
    assert event.message == (f"container main uses 5120 MiB of GPU {GPU1}, above its grant "
                             f"of 4096 MiB")
    assert agent.watchdog.breaches == 1
    assert agent.watchdog.evictions == 0
    assert cluster.get("pods", "p", "default")  # report only: the pod stays


def test_evict_goes_through_the_eviction_api(tmp_path: Path) -> None:
    agent, cluster, _ = setup(tmp_path, watchdog_config("evict"),
                              [{"pid": 100, "used_memory_mib": 5120}])
    agent.watchdog._pods = pods_of(cluster)
    calls: list[tuple[str, str, str]] = []
    real = cluster.evict

    def evict(namespace: str, name: str, *, uid: str = "") -> None:
        calls.append((namespace, name, uid))
        real(namespace, name, uid=uid)

    cluster.evict = evict  # type: ignore[method-assign]
    uid = cluster.get("pods", "p", "default")["metadata"]["uid"]
    agent.watchdog.check()
    assert calls == [("default", "p", uid)]  # this pod only (preconditions.uid)
    assert agent.watchdog.evictions == 1


def test_a_successor_of_the_name_is_never_evicted_for_its_predecessor(
        tmp_path: Path) -> None:
    agent, cluster, _ = setup(tmp_path, watchdog_config("evict"),
                              [{"pid": 100, "used_memory_mib": 5120}])
    seen = cluster.list("pods").items  # what the agent's watch showed: the breaching pod
    agent.watchdog._pods = lambda: seen
    # Meanwhile its StatefulSet replaced it: same name, another uid.
    cluster.delete("pods", "p", "default")
    successor = cluster.create("pods", pod("p", [container("main", 1, mem=4096, cores=30)]))
    agent.watchdog.check()
    assert agent.watchdog.evictions == 0
    assert cluster.get("pods", "p", "default")["metadata"]["uid"] == (
        successor["metadata"]["uid"])


def test_a_disruption_budget_refusal_is_retried_next_round(tmp_path: Path) -> None:
    agent, cluster, _ = setup(tmp_path, watchdog_config("evict"),
                              [{"pid": 100, "used_memory_mib": 5120}])
    agent.watchdog._pods = pods_of(cluster)
    tries: list[str] = []

    def refuse(namespace: str, name: str, *, uid: str = "") -> None:
        tries.append(name)
        raise EvictionRefusedError("Cannot evict pod as it would violate the pod's "
                                   "disruption budget")

    cluster.evict = refuse  # type: ignore[method-assign]
    agent.watchdog.check()
    agent.watchdog.check()
    assert tries == ["p", "p"]
    assert agent.watchdog.evictions == 0
    assert cluster.get("pods", "p", "default")


def test_the_agent_runs_it_and_serves_the_metrics(tmp_path: Path) -> None:
    config = from_mapping({"isolation": {"watchdog": {"intervalSeconds": 0.05}}})
    agent, _, _ = setup(tmp_path, config, [{"pid": 100, "used_memory_mib": 5120}])
    agent.options = dataclasses.replace(agent.options, metrics_port=0,
                                        metrics_host="127.0.0.1")
    agent.start()
    try:
        wait_until(lambda: agent.watchdog.breaches == 1, what="a breach")
        assert agent.metrics_server is not None
        url = f"http://127.0.0.1:{agent.metrics_server.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
    finally:
        agent.stop()
    assert "vgpu_watchdog_breaches_total 1.0" in text
    assert f'vgpu_gpu_foreign_memory_bytes{{uuid="{GPU0}"}}' in text
    assert 'vgpu_container_memory_used_bytes{container="main"' in text
