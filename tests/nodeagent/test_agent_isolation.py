"""The node agent's isolation backends over real gRPC: MPS through the daemon stand-in,
the node label, and the bad inputs (unknown mode, a daemon that will not start, a missing
pipe folder): clear errors, the agent keeps serving, and every pod is still answered."""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.request
from pathlib import Path
from typing import Any

from tests.nodeagent.conftest import GPU1, NODE, envs, wait_phase, wait_until
from tests.nodeagent.mps_support import commands, kill_daemon, mps_config, mps_settings
from tests.support import hami_standin
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import decode_inventory
from vgpu.config import Config, from_mapping
from vgpu.pod_history import decode_allocation


def node_with_label(value: str | None) -> MemoryCluster:
    cluster = MemoryCluster()
    labels = {} if value is None else {"vgpu.io/isolation": value}
    cluster.create("nodes", {"metadata": {"name": NODE, "labels": labels}})
    return cluster


def small(config: Config) -> Config:
    return dataclasses.replace(config, nodeagent=dataclasses.replace(
        config.nodeagent, allocate_wait_seconds=0.3, heartbeat_seconds=1.0,
        pod_resources_socket=""))


def admit(env: Any, name: str, mem: int = 4096, cores: int = 30) -> tuple[dict[str, str], Any]:
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod(name, [container("main", 1, mem=mem, cores=cores)]),
                  NODE, {"main": slices((GPU1, mem, cores))})
    (response,) = env.kubelet.admit_pod([1])
    wait_phase(env, name, "success")
    return envs(response), response


def annotations(env: Any, name: str) -> dict[str, str]:
    return dict(env.cluster.get("pods", name, "default")["metadata"]["annotations"])


def inventory_modes(env: Any) -> set[str]:
    node = env.cluster.get("nodes", NODE)
    raw = node["metadata"].get("annotations", {}).get("vgpu.io/node-gpus")
    return {d.isolation for d in decode_inventory(raw).devices} if raw else set()


def healthz(env: Any) -> str:
    port = env.agent.metrics_server.port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
        return str(reply.read().decode())


def metrics(env: Any) -> str:
    port = env.agent.metrics_server.port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


def test_mps_node_answers_with_the_pipe_folder_and_limits(make_env: Any,
                                                          tmp_path: Path) -> None:
    env = make_env(small(mps_config(tmp_path)))
    env.kubelet.wait_registration()
    got, response = admit(env, "p1")
    assert got == {"NVIDIA_VISIBLE_DEVICES": GPU1,
                   "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "pipe"),
                   "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M",
                   "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30"}
    assert [(m.container_path, m.host_path) for m in response.mounts] == \
        [(str(tmp_path / "pipe"), str(tmp_path / "pipe"))]
    ann = annotations(env, "p1")
    assert ann["vgpu.io/isolation"] == "mps"
    record = decode_allocation(ann["vgpu.io/allocation"])
    assert record.isolation.mode == "mps" and record.isolation.enforced
    wait_until(lambda: inventory_modes(env) == {"mps"}, what="inventory mode mps")
    assert [c["argv"] for c in commands(tmp_path)].count(["-d"]) == 1
    assert "isolation mps" in healthz(env)
    text = metrics(env)
    assert "vgpu_mps_daemon_up 1.0" in text
    assert 'vgpu_nodeagent_isolation_mode{configured="mps",mode="mps"} 1.0' in text


def test_mps_hami_core_node_answers_mps_with_hamis_memory_hooks(make_env: Any,
                                                                tmp_path: Path) -> None:
    library = hami_standin.library(tmp_path / "libvgpu.so")
    config = from_mapping({"isolation": {"mode": "mps-hami-core",
                                         "mps": mps_settings(tmp_path)},
                           "nodeagent": {"hamiCorePath": str(library),
                                         "sharedCacheDir": str(tmp_path / "cache")}})
    env = make_env(small(config))
    env.kubelet.wait_registration()
    got, response = admit(env, "p1")
    assert got["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert got["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    assert got["CUDA_DEVICE_SM_LIMIT"] == "0"
    assert str(library) in [m.host_path for m in response.mounts]
    assert annotations(env, "p1")["vgpu.io/isolation"] == "mps-hami-core"
    wait_until(lambda: inventory_modes(env) == {"mps-hami-core"}, what="inventory mode")
    # The container's cache folder exists, as for hami-core.
    assert any((tmp_path / "cache" / "containers").iterdir())


def test_mps_hami_core_without_the_library_runs_mps_and_says_why(make_env: Any,
                                                                 tmp_path: Path) -> None:
    config = from_mapping({"isolation": {"mode": "mps-hami-core",
                                         "mps": mps_settings(tmp_path)}})
    env = make_env(small(config))
    env.kubelet.wait_registration()
    live = env.agent.backend.current()
    assert (live.backend, live.mode, live.enforced) == ("mps", "mps", True)
    assert live.problem is not None and "hamiCorePath is not set" in live.problem
    got, _ = admit(env, "p1")
    assert "CUDA_DEVICE_MEMORY_LIMIT_0" not in got
    assert "vgpu_nodeagent_isolation_degraded 1.0" in metrics(env)


def test_node_label_selects_mps_and_a_dead_daemon_is_restarted(make_env: Any,
                                                                tmp_path: Path) -> None:
    settings = json.loads(json.dumps(mps_config(tmp_path).isolation.mps.__dict__))
    config = from_mapping({"isolation": {"mode": "none", "mps": {
        "controlCommand": settings["control_command"], "pipeDir": settings["pipe_dir"],
        "logDir": settings["log_dir"], "checkSeconds": 0.05,
        "restartBackoffSeconds": 0.05}}})
    env = make_env(small(config), cluster=node_with_label("mps"))
    env.kubelet.wait_registration()
    assert env.agent.backend.current().mode == "mps"
    kill_daemon(tmp_path)
    daemon = env.agent.backend.daemon
    assert daemon is not None
    wait_until(lambda: daemon.status().restarts == 1 and daemon.running, what="restart")
    got, _ = admit(env, "p1")
    assert got["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert "vgpu_mps_daemon_restarts_total 1.0" in metrics(env)


def test_unknown_mode_label_keeps_the_cluster_default(make_env: Any) -> None:
    env = make_env(small(Config()), cluster=node_with_label("cuda-magic"))
    env.kubelet.wait_registration()
    live = env.agent.backend.current()
    assert live.backend == "hami-core" and live.mode == "none"
    assert live.problem is not None and "'cuda-magic' is not an isolation mode" in live.problem
    assert "is not an isolation mode" in healthz(env)
    got, _ = admit(env, "p1")
    assert got["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    assert annotations(env, "p1")["vgpu.io/isolation"] == "none"
    assert "vgpu_nodeagent_isolation_degraded 1.0" in metrics(env)


def test_a_daemon_that_will_not_start_falls_back_and_keeps_serving(make_env: Any,
                                                                   tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "refuse").touch()
    env = make_env(small(mps_config(tmp_path)))
    env.kubelet.wait_registration()
    got, response = admit(env, "p1")
    # HAMi-core's answer, no mount of a pipe folder nobody serves
    assert got["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    assert not any(k.startswith("CUDA_MPS") for k in got)
    assert list(response.mounts) == []
    ann = annotations(env, "p1")
    assert ann["vgpu.io/isolation"] == "none"
    assert "MPS control daemon not running" in decode_allocation(
        ann["vgpu.io/allocation"]).isolation.detail
    wait_until(lambda: inventory_modes(env) == {"none"}, what="inventory mode none")
    assert "could not be started" in healthz(env)
    assert "vgpu_mps_daemon_up 0.0" in metrics(env)
    # Once the daemon starts, new pods get MPS and the inventory says so.
    (tmp_path / "log" / "refuse").unlink()
    wait_until(lambda: inventory_modes(env) == {"mps"}, what="inventory mode mps")
    got, _ = admit(env, "p2", mem=2048, cores=20)
    assert got["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=2048M"


def test_a_missing_pipe_folder_falls_back_until_the_daemon_is_back(make_env: Any,
                                                                   tmp_path: Path) -> None:
    env = make_env(small(mps_config(tmp_path, checkSeconds=30)))
    env.kubelet.wait_registration()
    kill_daemon(tmp_path)
    os.rmdir(tmp_path / "pipe")
    got, response = admit(env, "p1")
    assert "CUDA_MPS_PIPE_DIRECTORY" not in got and list(response.mounts) == []
    assert env.agent.backend.current().problem is not None
    assert "p1" in {p["metadata"]["name"] for p in env.cluster.list("pods").items}
