"""The node agent never hands one pod's grant to another (issue 24).

A pod bound to the node that asks for the device resource but that no vgpu scheduler placed
(created with ``spec.nodeName``, naming another scheduler, forging vgpu's annotations while
the webhook was down) is an intruder. Allocate names no pod; when the intruder comes first
in the order the watch showed the node's pods, the Allocate is its own: it is refused
(``PERMISSION_DENIED``, an ``AllocateRefused`` event, a metric), and the vgpu pod in
allocation keeps its grant for its own Allocate, which completes. Over real gRPC, with the
kubelet stand-in and a memory cluster, as the issue reproduced it.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import urllib.request
from typing import Any

import grpc
import pytest

from tests.nodeagent.conftest import GPU0, GPU1, NODE, envs, wait_phase, wait_until
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, BIND_TIME, PHASE_ALLOCATING
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment, encode_assignment, encode_heartbeat

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def ready(make_env: Any) -> Any:
    env = make_env()
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    return env


def intruder(env: Any, name: str = "intruder", *, scheduler: str = "x", gpus: int = 1,
             annotations: dict[str, str] | None = None) -> Obj:
    """A pod created on the node (never scheduled), as the kubelet receives it."""
    obj = pod(name, [container("main", gpus)])
    obj["spec"].update(nodeName=NODE, schedulerName=scheduler)
    if annotations:
        obj["metadata"]["annotations"] = dict(annotations)
    return env.cluster.create("pods", obj)


def victim(env: Any, name: str = "victim") -> Obj:
    return bind_assigned(env.cluster, pod(name, [container("main", 1)]), NODE,
                         {"main": slices((GPU1, 3000, 30))}, T0)


def seen_by_agent(env: Any, *names: str) -> None:
    wait_until(lambda: {p["metadata"]["name"] for p in env.agent._pods()} >= set(names),
               what=f"{names} in the agent's watch")


def refused(env: Any, count: int = 1) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        env.kubelet.admit_pod([count])
    error: grpc.RpcError = raised.value
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    return error


def events(env: Any, reason: str) -> list[Any]:
    return list(env.cluster.events(reason=reason))


def metric(env: Any, name: str) -> float:
    port = env.agent.metrics_server.port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(values[0]) if values else 0.0


@pytest.mark.parametrize("scheduler", ["x", "default-scheduler"])
def test_an_intruder_before_the_vgpu_pod_is_refused_and_the_victim_completes(
        make_env: Any, scheduler: str) -> None:
    """The issue's case: the intruder is bound first; its Allocate, which used to get the
    victim's grant, is refused; the victim's own Allocate then gets it."""
    env = ready(make_env)
    intruder(env, scheduler=scheduler)
    victim(env)
    seen_by_agent(env, "intruder", "victim")
    message = refused(env).details()
    assert "default/intruder" in message and "no vgpu scheduler placed it" in message
    assert f"spec.schedulerName '{scheduler}'" in message
    (granted,) = env.kubelet.admit_pod([1])
    assert envs(granted)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert envs(granted)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert wait_phase(env, "victim", "success") is None
    wait_until(lambda: bool(events(env, "AllocateRefused")), what="the refusal's event")
    (event,) = events(env, "AllocateRefused")
    assert (event.name, event.type) == ("intruder", "Warning")
    assert "no vgpu scheduler placed it" in event.message
    assert metric(env, "vgpu_nodeagent_allocate_refused_total") == 1.0


def test_an_intruder_does_not_wait_for_a_binding_to_steal(make_env: Any) -> None:
    """Allocate waits a moment for a pod in allocation to reach the watch; an intruder's
    Allocate, with nothing in allocation yet, used to wait for the next binding and take
    its grant. It is refused at once instead, and the binding that follows is served."""
    env = ready(make_env)
    intruder(env)
    seen_by_agent(env, "intruder")
    threading.Timer(0.1, lambda: victim(env)).start()
    started = time.monotonic()
    refused(env)
    assert time.monotonic() - started < 0.3  # allocateWaitSeconds is 0.3 here
    wait_until(lambda: "victim" in {p["metadata"]["name"] for p in env.agent._pods()})
    (granted,) = env.kubelet.admit_pod([1])
    assert envs(granted)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert wait_phase(env, "victim", "success") is None


def test_forged_annotations_on_another_schedulers_pod_are_no_placement(make_env: Any) -> None:
    """Annotations a pod's owner wrote (the webhook down) do not make it vgpu's: its
    spec.schedulerName cannot change after creation."""
    env = ready(make_env)
    forged = Assignment(NODE, {"main": slices((GPU0, 40000, 100))})
    intruder(env, annotations={ASSIGNMENT: encode_assignment(forged),
                               BIND_PHASE: PHASE_ALLOCATING,
                               BIND_TIME: encode_heartbeat(T0)})
    victim(env)
    seen_by_agent(env, "intruder", "victim")
    refused(env)
    (granted,) = env.kubelet.admit_pod([1])
    assert envs(granted)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert wait_phase(env, "victim", "success") is None


def test_a_vgpu_pod_ahead_of_an_intruder_is_served_first(make_env: Any) -> None:
    """The kubelet admits in watch order: the victim bound first is admitted first and
    served; the intruder behind it is refused when its turn comes."""
    env = ready(make_env)
    victim(env)
    seen_by_agent(env, "victim")
    intruder(env)
    seen_by_agent(env, "intruder")
    (granted,) = env.kubelet.admit_pod([1])
    assert envs(granted)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    assert wait_phase(env, "victim", "success") is None
    refused(env)


def test_a_request_of_a_size_the_intruder_does_not_ask_is_not_its_own(make_env: Any) -> None:
    env = ready(make_env)
    intruder(env, gpus=2)
    victim(env)
    seen_by_agent(env, "intruder", "victim")
    (granted,) = env.kubelet.admit_pod([1])  # one device: the victim's container
    assert envs(granted)["NVIDIA_VISIBLE_DEVICES"] == GPU1
    refused(env, 2)


def test_an_intruder_the_kubelet_already_admitted_is_not_waited_on(make_env: Any) -> None:
    """A pod that runs already (its status written by the kubelet) asks for nothing more:
    the agent does not hold the next vgpu pod's Allocate behind it."""
    env = ready(make_env)
    running = intruder(env)
    running["status"] = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    env.cluster.replace("pods", running)
    victim(env)
    seen_by_agent(env, "victim")
    wait_until(lambda: any(p["metadata"]["name"] == "intruder"
                           and (p.get("status") or {}).get("startTime")
                           for p in env.agent._pods()))
    (granted,) = env.kubelet.admit_pod([1])
    assert envs(granted)["NVIDIA_VISIBLE_DEVICES"] == GPU1
