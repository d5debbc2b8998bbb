"""The node agent admitting pods: Allocate and GetPreferredAllocation over real gRPC.

Driven by the kubelet stand-in against pods the scheduler would have bound (their
assignment annotation): the answers a container starts with, the pod's bind phase, and
every refusal with its gRPC status. Separate from ``test_agent`` (registration, device
list, inventory, metrics).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from typing import Any

import grpc
import pytest

from tests.nodeagent.conftest import (
    GPU0,
    GPU1,
    GPU2,
    NODE,
    envs,
    gpu,
    phase,
    small_config,
    wait_phase,
    wait_until,
)
from tests.support import hami_standin
from tests.support.kubelet import KubeletStandIn, device_plugin_dir
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu_nodeagent.agent import NodeAgent
from vgpu_nodeagent.devices.fake import FakeDiscovery
from vgpu_nodeagent.options import Options

# -- Allocate -------------------------------------------------------------------------------

def test_single_container_pod(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    created = bind_assigned(env.cluster, pod("p1", [container("main", 1, mem=3000, cores=30)]),
                            NODE, {"main": slices((GPU1, 3000, 30))})
    (response,) = env.kubelet.admit_pod([1])
    uid = created["metadata"]["uid"]
    assert envs(response) == {
        "NVIDIA_VISIBLE_DEVICES": GPU1,
        "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
        "CUDA_DEVICE_SM_LIMIT": "30",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": f"/tmp/vgpu/{uid}_main.cache",
    }
    assert list(response.mounts) == []
    # GetPreferredAllocation steered the kubelet to a slot of the assigned GPU.
    assert all(i.startswith(GPU1) for i in env.kubelet.allocated)
    assert wait_phase(env, "p1", "success") is None


def test_multi_container_pod_with_multi_gpu_container(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod("p2", [container("a", 1, mem=1000, priority=1),
                                          container("b", 2, mem=2000, cores=50)]),
                  NODE, {"a": slices((GPU0, 1000, 0)),
                         "b": slices((GPU2, 2000, 50), (GPU1, 2000, 50))})
    response_a, response_b = env.kubelet.admit_pod([1, 2])
    assert envs(response_a)["NVIDIA_VISIBLE_DEVICES"] == GPU0
    assert envs(response_a)["CUDA_TASK_PRIORITY"] == "1"
    assert envs(response_a)["CUDA_DEVICE_SM_LIMIT"] == "0"
    env_b = envs(response_b)
    assert env_b["NVIDIA_VISIBLE_DEVICES"] == f"{GPU2},{GPU1}"
    assert (env_b["CUDA_DEVICE_MEMORY_LIMIT_0"], env_b["CUDA_DEVICE_MEMORY_LIMIT_1"]) == \
        ("2000m", "2000m")
    assert "CUDA_TASK_PRIORITY" not in env_b
    gpus = sorted(i.rsplit("-", 1)[0] for i in env.kubelet.allocated)
    assert gpus == sorted([GPU0, GPU1, GPU2])
    wait_phase(env, "p2", "success")


def test_pod_stays_allocating_until_every_gpu_container_is_allocated(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod("p3", [container("a", 1), container("b", 1)]),
                  NODE, {"a": slices((GPU0, 100, 0)), "b": slices((GPU1, 100, 0))})
    env.kubelet.admit_container(1)
    time.sleep(0.2)
    assert phase(env, "p3")[0] == "allocating"
    _, response = env.kubelet.admit_container(1)
    assert envs(response)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    wait_phase(env, "p3", "success")


def test_one_allocate_call_with_several_container_requests(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod("p4", [container("a", 2), container("b", 1)]),
                  NODE, {"a": slices((GPU0, 10, 0), (GPU1, 10, 0)),
                         "b": slices((GPU2, 20, 0))})
    response = env.kubelet.allocate([f"{GPU2}-0"], [f"{GPU0}-0", f"{GPU1}-0"])
    first, second = response.container_responses
    assert envs(first)["NVIDIA_VISIBLE_DEVICES"] == GPU2
    assert envs(second)["NVIDIA_VISIBLE_DEVICES"] == f"{GPU0},{GPU1}"
    wait_phase(env, "p4", "success")


def test_init_containers_are_allocated_first(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster,
                  pod("p5", [container("app", 1, mem=5000)],
                      init_containers=[container("setup", 1, mem=500)]),
                  NODE, {"app": slices((GPU1, 5000, 0)), "setup": slices((GPU0, 500, 0))})
    setup, app = env.kubelet.admit_pod([1], init_counts=[1])
    assert envs(setup)["NVIDIA_VISIBLE_DEVICES"] == GPU0
    assert envs(setup)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "500m"
    assert envs(app)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert envs(app)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "5000m"
    wait_phase(env, "p5", "success")


def test_pods_one_after_another(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    for i, uuid in enumerate([GPU0, GPU1, GPU2, GPU0]):
        bind_assigned(env.cluster, pod(f"q{i}", [container("c", 1)]), NODE,
                      {"c": slices((uuid, 100 + i, 10))})
        (response,) = env.kubelet.admit_pod([1])
        assert envs(response)["NVIDIA_VISIBLE_DEVICES"] == uuid
        assert envs(response)["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{100 + i}m"
        wait_phase(env, f"q{i}", "success")


def test_no_pod_allocating_is_failed_precondition(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    with pytest.raises(grpc.RpcError) as info:
        env.kubelet.allocate([f"{GPU0}-0"])
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"no pod on node {NODE} is in vgpu.io/bind-phase=allocating" in info.value.details()


def test_count_matching_no_container_is_invalid_argument_and_fails_the_pod(
        make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod("p6", [container("main", 1)]), NODE,
                  {"main": slices((GPU0, 100, 0))})
    with pytest.raises(grpc.RpcError) as info:
        env.kubelet.allocate([f"{GPU0}-0", f"{GPU1}-0"])
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = info.value.details()
    assert "pod default/p6" in details
    assert "asks for 2 device(s)" in details and "main (1 GPU)" in details
    reason = wait_phase(env, "p6", "failed")
    assert reason is not None and "asks for 2 device(s)" in reason


def test_broken_assignment_fails_the_pod(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod("p7", [container("main", 1)]), NODE, {},
                  assignment_text="{not json")
    with pytest.raises(grpc.RpcError) as info:
        env.kubelet.allocate([f"{GPU0}-0"])
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "vgpu.io/assignment: not valid JSON" in info.value.details()
    wait_phase(env, "p7", "failed")


def test_unknown_device_ids_are_invalid_argument(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    with pytest.raises(grpc.RpcError) as info:
        env.kubelet.allocate(["GPU-not-ours-0"])
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "GPU-not-ours-0" in info.value.details()


def test_allocate_waits_for_the_binding_to_reach_the_watch(make_env: Any) -> None:
    env = make_env(small_config(allocate_wait_seconds=3.0))
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    def bind_later() -> None:
        time.sleep(0.3)
        bind_assigned(env.cluster, pod("late", [container("c", 1)]), NODE,
                      {"c": slices((GPU2, 100, 0))})

    thread = threading.Thread(target=bind_later)
    thread.start()
    response = env.kubelet.allocate([f"{GPU2}-3"])
    thread.join()
    assert envs(response.container_responses[0])["NVIDIA_VISIBLE_DEVICES"] == GPU2


def test_hami_core_mounts_and_oversubscription(make_env: Any, tmp_path: Any) -> None:
    library = hami_standin.library(tmp_path / "libvgpu.so")
    cache = tmp_path / "cache"
    config = small_config(hami_core_path=str(library), shared_cache_dir=str(cache))
    config = dataclasses.replace(config, device_memory_scaling=1.5, disable_core_limit=True)
    env = make_env(config)
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    spec = pod("h", [container("c", 1, cores=40)])
    spec["spec"]["securityContext"] = {"runAsUser": 1234, "runAsGroup": 5678}
    created = bind_assigned(env.cluster, spec, NODE, {"c": slices((GPU0, 1000, 40))})
    uid = created["metadata"]["uid"]
    (response,) = env.kubelet.admit_pod([1])
    e = envs(response)
    assert e["CUDA_OVERSUBSCRIBE"] == "true"
    assert e["CUDA_DEVICE_SM_LIMIT"] == "0"
    assert e["GPU_CORE_UTILIZATION_POLICY"] == "disable"
    assert e["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == f"{cache}/{uid}_c.cache"
    mounts = {m.container_path: (m.host_path, m.read_only) for m in response.mounts}
    assert mounts == {
        "/usr/local/vgpu/libvgpu.so": (str(library), True),
        "/etc/ld.so.preload": (f"{cache}/ld.so.preload", True),
        str(cache): (f"{cache}/containers/{uid}_c", False),
        # The agent's own folder, never a host /tmp path a tenant could plant a link at.
        "/tmp/vgpulock": (f"{cache}/vgpulock", False),
    }
    assert (cache / "ld.so.preload").read_text() == "/usr/local/vgpu/libvgpu.so\n"
    lock = (cache / "vgpulock").stat()
    assert (lock.st_mode & 0o7777, lock.st_uid) == (0o1777, 0)
    # The container's own folder: its user's (the pod's runAsUser), nobody else's.
    folder = (cache / "containers" / f"{uid}_c").stat()
    assert (folder.st_mode & 0o7777, folder.st_uid, folder.st_gid) == (0o700, 1234, 5678)
    env.cluster.delete("pods", "h", "default")
    wait_until(lambda: not (cache / "containers" / f"{uid}_c").exists(), 20,
               "the deleted pod's folder removed")


def test_preferred_allocation_honours_must_include_and_size(make_env: Any) -> None:
    env = make_env(split=2)
    env.kubelet.wait_registration()
    available = env.kubelet.devices().wait_for(lambda d: len(d) == 6)
    bind_assigned(env.cluster, pod("pp", [container("c", 2)]), NODE,
                  {"c": slices((GPU2, 1, 0), (GPU1, 1, 0))})
    ids = [d.ID for d in available]
    assert env.kubelet.preferred(ids, [], 2) == [f"{GPU2}-0", f"{GPU1}-0"]
    assert env.kubelet.preferred(ids, [f"{GPU0}-1"], 2) == [f"{GPU0}-1", f"{GPU2}-0"]


def test_without_cluster_allocate_says_why(tmp_path: Any) -> None:
    with device_plugin_dir() as folder:
        config = small_config()
        config = dataclasses.replace(config, nodeagent=dataclasses.replace(
            config.nodeagent, device_plugin_dir=folder))
        devices = tmp_path / "gpus.json"
        devices.write_text(json.dumps({"devices": [gpu(GPU0, 0)]}))
        kubelet = KubeletStandIn(folder)
        kubelet.start()
        agent = NodeAgent(config, FakeDiscovery(str(devices)), None,
                          Options(node_name=NODE, poll_seconds=0.05))
        agent.start()
        try:
            kubelet.wait_registration()
            with pytest.raises(grpc.RpcError) as info:
                kubelet.allocate([f"{GPU0}-0"])
            assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "--no-cluster" in info.value.details()
        finally:
            agent.stop()
            kubelet.stop()
