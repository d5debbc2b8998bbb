"""`vgpu why` on the real API server: a bound pod, a pending pod and a denied pod.

The whole stack runs as processes (webhook, scheduler, a node agent with one 40 GiB GPU
and a kubelet stand-in): every fact the command shows was written by the component that
knew it (the webhook's admission record and denial event, the scheduler's events and
assignment, the agent's allocation record), and read back by the command alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.harness import FullStack, Gpu, NodeSpec, wait_until
from tests.e2e.ops_support import vgpu
from vgpu.errors import ClusterError

A100 = "NVIDIA A100-SXM4-40GB"


def gpu_pod(name: str, memory: int, cores: int = 10) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {
                "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory),
                           "nvidia.com/gpucores": str(cores)}}}]}}


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[tuple[FullStack, str]]:
    with FullStack(control_plane, [NodeSpec("why", (Gpu(A100, 40960),))]) as stack:
        namespace = stack.namespace(f"why-{stack.tag}")
        stack.create_pod(namespace, gpu_pod("trainer", 30000, 50))
        stack.wait_allocated(namespace, "trainer")
        stack.create_pod(namespace, gpu_pod("waits", 20000))
        wait_until("the scheduler reports waits unschedulable", lambda: any(
            e["reason"] == "FailedScheduling" for e in stack.events(namespace, "waits")), 30,
            interval=0.2, context=stack.logs)
        # HAMi clamps gpucores over 100; a negative one is refused by both.
        with pytest.raises(ClusterError, match="must not be negative"):
            stack.create_pod(namespace, gpu_pod("greedy", 1000, cores=-5))
        wait_until("the webhook records its denial", lambda: any(
            e["reason"] == "FailedAdmission" for e in stack.events(namespace, "greedy")), 30,
            interval=0.2, context=stack.logs)
        yield stack, namespace
        stack.clear(namespace)


def why(stack: FullStack, namespace: str, pod: str, *args: str) -> tuple[int, str]:
    proc = vgpu("why", pod, "-n", namespace, "--kubeconfig", str(stack.cp.kubeconfig),
                "--config", str(stack.workdir / "config.yaml"), *args)
    assert not proc.stderr.strip() or proc.returncode in (0, 1), proc.stderr
    return proc.returncode, proc.stdout


def report(stack: FullStack, namespace: str, pod: str) -> dict[str, Any]:
    _, out = why(stack, namespace, pod, "-o", "json")
    data: dict[str, Any] = json.loads(out)
    return data


def test_a_bound_pod_shows_its_node_gpus_allocate_and_isolation(
        stack: tuple[FullStack, str]) -> None:
    s, namespace = stack
    data = report(s, namespace, "trainer")
    (node,) = s.nodes
    assert data["state"] == "running" and data["node"] == node
    assert data["admission"][0] == f'spec.schedulerName: "{s.scheduler_name}"'
    (gpu,) = data["gpus"]
    assert (gpu["container"], gpu["model"], gpu["memory_mib"], gpu["cores"]) == (
        "main", A100, 30000, 50)
    allocation = data["allocation"]
    assert allocation["node"] == node and allocation["containers"] == ["main"]
    assert 0 <= allocation["bind_to_allocate_seconds"] < 30
    assert allocation["isolation"]["mode"] == "none"
    assert allocation["isolation"]["enforced"] is False
    code, text = why(s, namespace, "trainer")
    assert code == 0 and f"Pod {namespace}/trainer: running" in text
    print(text)
    assert "Isolation:    none" in text


def test_a_pending_pod_shows_the_last_attempt_and_what_is_short(
        stack: tuple[FullStack, str]) -> None:
    s, namespace = stack
    data = report(s, namespace, "waits")
    assert data["state"] == "unschedulable"
    assert "insufficient GPU memory" in data["last_attempt"]["message"]
    (closest,) = data["closest"]
    assert closest["fits"] is False
    assert closest["short"] == [
        f"container main: 0/1 GPU(s) fit; closest GPU 0 ({A100}): memory: need 20000 MiB, "
        f"free 10960 MiB"]
    code, text = why(s, namespace, "waits")
    assert code == 0
    assert "memory: need 20000 MiB, free 10960 MiB" in text
    print(text)  # docs/operator-guide.md's example comes from this output


def test_a_denied_pod_shows_the_webhooks_reason(stack: tuple[FullStack, str]) -> None:
    s, namespace = stack
    code, text = why(s, namespace, "greedy")
    assert code == 1
    assert text.startswith(f"Pod {namespace}/greedy: denied")
    assert "the vgpu webhook denied it" in text and "cores" in text
    assert report(s, namespace, "greedy")["state"] == "denied"
    missing = report(s, namespace, "never-created")
    assert missing["state"] == "not-found"
