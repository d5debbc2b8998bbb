"""The node is the last check (issue 36): the agent, over real gRPC, refuses a grant that
would take a GPU past what it has, whatever placed the pod; it records what it served where
the pod's owner cannot write, rebuilds from that record after a restart, and names an
edited assignment instead of obeying it."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from tests.nodeagent.conftest import GPU1, NODE, envs, phase, wait_phase, wait_until
from tests.nodeagent.test_agent_intruders import events, metric
from tests.nodeagent.test_agent_restart import restart
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu import served
from vgpu.annotations import ASSIGNMENT


def over(env: Any, name: str, mib: int, cores: int = 0) -> None:
    """A pod bound as a scheduler that sees nothing else on GPU1 would bind it."""
    bind_assigned(env.cluster, pod(name, [container("main", 1, mem=mib)]), NODE,
                  {"main": slices((GPU1, mib, cores))})


def refused(env: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        env.kubelet.admit_pod([1])
    error: grpc.RpcError = raised.value
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
    return error


def test_a_grant_past_the_gpu_is_refused_and_the_served_record_survives_a_restart(
        make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    over(env, "a", 30000, 60)
    (answer,) = env.kubelet.admit_pod([1])
    assert envs(answer)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    wait_phase(env, "a", "success")
    record = served.served(env.cluster.get("pods", "a", "default"))
    assert record is not None and record.containers["main"][0].memory_mib == 30000

    over(env, "b", 20000)  # 50000 of GPU1's 40960 MiB with a's
    error = refused(env)
    assert "GPU " + GPU1 in error.details() and "insufficient GPU memory" in error.details()
    assert wait_phase(env, "b", "failed") is not None
    assert "30000 of its 40960 MiB" in (phase(env, "b")[1] or "")
    wait_until(lambda: bool(events(env, "GPUOvercommitRefused")), what="the event")
    (event,) = events(env, "GPUOvercommitRefused")
    assert event.name == "b" and event.type == "Warning"
    assert metric(env, "vgpu_nodeagent_overcommit_refused_total") == 1

    # A new process knows what the last one served, from the pods alone.
    agent = restart(env, 2)
    try:
        over(env, "c", 12000)
        refused(env)
        over(env, "d", 10000, 40)  # fits beside a: 40000 MiB, 100 %
        (answer,) = env.kubelet.admit_pod([1])
        assert envs(answer)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "10000m"
    finally:
        agent.stop()


def test_an_edited_assignment_is_named_and_not_obeyed(make_env: Any) -> None:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    over(env, "a", 30000)
    env.kubelet.admit_pod([1])
    wait_phase(env, "a", "success")
    pod_obj = env.cluster.get("pods", "a", "default")
    edited = json.loads(pod_obj["metadata"]["annotations"][ASSIGNMENT])
    edited["containers"]["main"][0]["memory_mib"] = 1000
    env.cluster.patch_annotations("pods", "a", {ASSIGNMENT: json.dumps(edited)}, "default")
    wait_until(lambda: bool(events(env, "AssignmentEdited")), what="the event")
    (event,) = events(env, "AssignmentEdited")
    assert event.name == "a" and "vgpu.io/Allocated" in event.message
    assert metric(env, "vgpu_nodeagent_assignment_edited_total") == 1
    # What the node counts is still what it served: 30000 MiB, not 1000.
    over(env, "b", 20000)
    refused(env)
