"""HAMi's quotas (``limits.nvidia.com/gpumem`` / ``gpucores`` on a ResourceQuota) through
the whole scheduler: a pod that would take its namespace past a cap waits, with the
quota named, and is placed once room is freed or the cap raised."""

from __future__ import annotations

from tests.scheduler.e2e_support import allocated, gpu_node, node_of, setup
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config


def quota(hard: dict[str, str], namespace: str = "default", name: str = "gpu") -> Obj:
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard}}


def last_event(cluster: MemoryCluster, name: str) -> str:
    return cluster.events(name=name)[-1].message


def test_memory_cap_holds_the_second_pod_until_the_first_is_gone() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 2)])
    cluster.create("resourcequotas", quota({"limits.nvidia.com/gpumem": "3000"}))
    for name in ("a", "b"):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"
    assert node_of(cluster, "b") is None
    message = last_event(cluster, "b")
    assert "GPU memory quota exceeded" in message and "ResourceQuota gpu" in message
    allocated(cluster, "a")
    cluster.delete("pods", "a", "default")
    clock.advance(5)  # past its backoff; the deletion woke it
    sched.run_until_idle()
    assert node_of(cluster, "b") == "n1"


def test_cores_cap_and_an_explicit_zero() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2)])
    cluster.create("resourcequotas", quota({"limits.nvidia.com/gpucores": "50"}))
    cluster.create("resourcequotas", quota({"limits.nvidia.com/gpumem": "0"}, "team-zero"))
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000, cores=40)]))
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=1000, cores=20)]))
    cluster.create("pods", builders.pod("z", [builders.container(gpumem=1)],
                                        namespace="team-zero"))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"
    assert node_of(cluster, "b") is None
    assert "GPU cores quota exceeded" in last_event(cluster, "b")
    z = cluster.get("pods", "z", "team-zero")
    assert z["spec"].get("nodeName") is None


def test_other_namespaces_and_other_keys_do_not_cap() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1)])
    cluster.create("resourcequotas", quota({"limits.nvidia.com/gpumem": "100"}, "other"))
    cluster.create("resourcequotas", quota({"requests.nvidia.com/gpumem": "100",
                                            "limits.nvidia.com/gpumem": "1.5"}))
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=4000)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"


def test_memory_factor_scales_the_cap() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2)], Config(memory_factor=10))
    cluster.create("resourcequotas", quota({"limits.nvidia.com/gpumem": "300"}))
    # gpumem 200 with memoryFactor 10 is 2000 MiB: one fits under 3000 MiB, two do not.
    for name in ("a", "b"):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=200)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"
    assert node_of(cluster, "b") is None


def test_raising_the_cap_places_the_waiting_pod() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 2)])
    cluster.create("resourcequotas", quota({"limits.nvidia.com/gpumem": "1000"}))
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") is None
    cluster.replace("resourcequotas", quota({"limits.nvidia.com/gpumem": "4000"}))
    clock.advance(5)
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"
