"""Several GPU pods in allocation on one node: Allocate matched by the GPUs the device IDs
name, GetPreferredAllocation steering each request to the oldest pod still waiting.

Over real gRPC, with the kubelet stand-in; the scheduler side of the same rule (which pods
may be in flight together) is in tests/scheduler/test_gate_narrowed.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.nodeagent.conftest import GPU0, GPU1, GPU2, NODE, envs, wait_phase
from tests.support.pods import bind_assigned, container, pod, slices

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def ready(make_env: Any) -> Any:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    return env


def bind_a_and_b(env: Any) -> Any:
    """Pod a in flight on GPU1 (1000 MiB, 10 %), then pod b on GPU2 (2000 MiB, 20 %)."""
    bind_assigned(env.cluster, pod("a", [container("c", 1)]), NODE,
                  {"c": slices((GPU1, 1000, 10))}, T0)
    bind_assigned(env.cluster, pod("b", [container("c", 1)]), NODE,
                  {"c": slices((GPU2, 2000, 20))}, T0 + dt.timedelta(seconds=1))
    return env


def test_two_pods_in_flight_on_different_gpus_each_get_their_own_grant(make_env: Any) -> None:
    env = bind_a_and_b(ready(make_env))
    # The kubelet admits b first, on b's GPU (say its preference came from elsewhere).
    second = env.kubelet.allocate([f"{GPU2}-3"]).container_responses[0]
    assert envs(second)["NVIDIA_VISIBLE_DEVICES"] == GPU2
    assert envs(second)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m"
    assert wait_phase(env, "b", "success") is None
    (first,) = env.kubelet.admit_pod([1])
    assert envs(first)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert envs(first)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1000m"
    assert wait_phase(env, "a", "success") is None


def test_preferred_allocation_steers_to_the_oldest_waiting_pod(make_env: Any) -> None:
    env = ready(make_env)
    for i, uuid in enumerate((GPU2, GPU0, GPU1)):
        bind_assigned(env.cluster, pod(f"p{i}", [container("c", 1)]), NODE,
                      {"c": slices((uuid, 100 + i, 10))}, T0 + dt.timedelta(seconds=i))
    for i, uuid in enumerate((GPU2, GPU0, GPU1)):
        (response,) = env.kubelet.admit_pod([1])
        assert envs(response)["NVIDIA_VISIBLE_DEVICES"] == uuid
        assert envs(response)["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{100 + i}m"
        assert any(i.startswith(uuid) for i in env.kubelet.allocated)
    for i in range(3):
        assert wait_phase(env, f"p{i}", "success") is None


def test_slots_on_no_assigned_gpu_fall_back_to_the_oldest_pod_by_count(make_env: Any) -> None:
    env = bind_a_and_b(ready(make_env))
    response = env.kubelet.allocate([f"{GPU0}-0"]).container_responses[0]
    # The assignment wins over the kubelet's slot: the scheduler accounted for it.
    assert envs(response)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert wait_phase(env, "a", "success") is None
