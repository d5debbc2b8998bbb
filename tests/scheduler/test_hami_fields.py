"""HAMi's pod and node fields through the whole scheduler (the in-memory cluster): the
per-GPU cordon, the mutex policy, ``nvidia.com/vgpu-mode``, the ``NVIDIA-`` type names,
and init containers counted as Kubernetes counts them. HAMi's own test tables, run through
the same code, are in tests/hami/."""

from __future__ import annotations

import dataclasses
import json

from tests.scheduler.e2e_support import allocated, gpu_node, setup
from vgpu import builders
from vgpu.annotations import ASSIGNMENT
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import decode_assignment
from vgpu.hami_fields import DEVICE_CORDON


def placed(cluster: MemoryCluster, name: str) -> dict[str, list[tuple[str, int, int]]]:
    obj = cluster.get("pods", name, "default")
    raw = obj["metadata"].get("annotations", {}).get(ASSIGNMENT)
    if raw is None:
        return {}
    return {c: [(s.uuid, s.memory_mib, s.cores) for s in slices]
            for c, slices in decode_assignment(raw).containers.items()}


def last_event(cluster: MemoryCluster, name: str) -> str:
    return cluster.events(name=name)[-1].message


def test_a_cordoned_gpu_keeps_its_pods_and_takes_no_new_one() -> None:
    node = gpu_node("n1", 2)
    node["metadata"]["annotations"][DEVICE_CORDON] = " GPU-n1-0 ,"
    sched, cluster, _ = setup([node])
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    assert placed(cluster, "a") == {"main": [("GPU-n1-1", 1000, 0)]}
    allocated(cluster, "a")
    node = cluster.get("nodes", "n1")
    node["metadata"]["annotations"][DEVICE_CORDON] = "GPU-n1-0,GPU-n1-1"
    cluster.replace("nodes", node)
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    assert placed(cluster, "b") == {}
    assert "GPU cordoned" in last_event(cluster, "b")


def test_mutex_takes_only_an_idle_gpu() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2)])
    mutex = {"hami.io/gpu-scheduler-policy": "mutex"}
    for name in ("a", "b", "c"):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=1000)],
                                            annotations=mutex))
        sched.run_until_idle()
        if placed(cluster, name):
            allocated(cluster, name)
    assert {placed(cluster, n)["main"][0][0] for n in ("a", "b")} == {"GPU-n1-0", "GPU-n1-1"}
    assert placed(cluster, "c") == {}
    assert "only idle GPUs requested" in last_event(cluster, "c")


def test_vgpu_mode_takes_only_a_gpu_of_that_mode() -> None:
    devices = tuple(dataclasses.replace(d, isolation=mode) for d, mode in zip(
        builders.devices("n1", 2, model="Tesla T4", memory_mib=16384), ("hami-core", "mps"),
        strict=True))
    sched, cluster, clock = setup([])
    cluster.create("nodes", builders.node("n1", devices, heartbeat=clock.now))
    cluster.create("pods", builders.pod("m", [builders.container(gpumem=1000)],
                                        annotations={"nvidia.com/vgpu-mode": "mps"}))
    cluster.create("pods", builders.pod("x", [builders.container(gpumem=1000)],
                                        annotations={"nvidia.com/vgpu-mode": "mig"}))
    sched.run_until_idle()
    assert placed(cluster, "m") == {"main": [("GPU-n1-1", 1000, 0)]}
    assert placed(cluster, "x") == {}
    assert "GPU isolation mode excluded" in last_event(cluster, "x")


def test_use_gputype_nvidia_finds_a_tesla() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1)])
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)],
                                        annotations={"nvidia.com/use-gputype": "NVIDIA"}))
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=1000)], annotations={
        "nvidia.com/nouse-gputype": "NVIDIA-Tesla"}))
    sched.run_until_idle()
    assert placed(cluster, "a")
    assert placed(cluster, "b") == {}


def test_an_init_container_inside_the_apps_slice_takes_nothing_more() -> None:
    # One 16 GiB GPU: init 10000 + app 12000 would not fit added; counted by the largest
    # (the init container has ended when the app runs) they take 12000, and a second pod
    # of 4000 still fits beside them.
    sched, cluster, _ = setup([gpu_node("n1", 1)])
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=12000)],
                                        init_containers=[builders.container(
                                            "warm", gpumem=10000)]))
    sched.run_until_idle()
    assert placed(cluster, "p") == {"warm": [("GPU-n1-0", 10000, 0)],
                                    "main": [("GPU-n1-0", 12000, 0)]}
    allocated(cluster, "p")
    cluster.create("pods", builders.pod("q", [builders.container(gpumem=4000)]))
    sched.run_until_idle()
    assert placed(cluster, "q") == {"main": [("GPU-n1-0", 4000, 0)]}


def test_a_larger_init_container_is_placed_where_the_app_is_when_it_fits() -> None:
    # Larger than the app's slice: placed on its own, preferring the app's GPU (the
    # kubelet hands its device IDs to the app container); held by the largest there.
    sched, cluster, _ = setup([gpu_node("n1", 2)])
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=4000)],
                                        init_containers=[builders.container(
                                            "warm", gpumem=9000)]))
    sched.run_until_idle()
    got = placed(cluster, "p")
    assert got["warm"][0][0] == got["main"][0][0]
    allocated(cluster, "p")
    # The other GPU taken whole, what is left beside p is 16384 - 9000 (not - 13000).
    cluster.create("pods", builders.pod("r", [builders.container(gpumem=16384)]))
    sched.run_until_idle()
    allocated(cluster, "r")
    cluster.create("pods", builders.pod("q", [builders.container(gpumem=16384 - 9000)]))
    sched.run_until_idle()
    assert placed(cluster, "r") and placed(cluster, "q")
    assert json.dumps(placed(cluster, "q")).count(got["main"][0][0]) == 1
