"""vgpu end to end: webhook, scheduler and node agents as processes on a real API server.

Pods are written the way users write them (no schedulerName, no vgpu annotations) and
created through the API server, which sends them to ``vgpu webhook``; ``vgpu scheduler``
binds them; each node's kubelet stand-in admits them through its real ``vgpu nodeagent``
(GetPreferredAllocation + Allocate), whose answers are what a container would start with.

The simulated cluster (tests/e2e/harness.py), one per module:

* ``v100``: two Tesla V100-SXM2-32GB (32768 MiB), NUMA 0 and 1;
* ``t4``: one Tesla T4 (15360 MiB).

Each test has its own namespace and deletes its pods at the end (the kubelet stand-in
finishes the graceful deletions), so every test starts on idle GPUs. The pod builders and
readers are in ``full_stack_support``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.full_stack_support import (
    assignment_of,
    failed_scheduling,
    gpu_container,
    gpu_pod,
    limits_of,
    node_named,
)
from tests.e2e.harness import FullStack, Gpu, NodeSpec, allocated, bind_phase, wait_until
from tests.e2e.harness_pods import namespace_for_test
from vgpu.annotations import GPUMEM_PERCENTAGE, NOUSE_GPUTYPE, USE_GPUTYPE
from vgpu.cluster.port import Obj
from vgpu.errors import ClusterError

V100 = Gpu("Tesla V100-SXM2-32GB", 32768)
T4 = Gpu("Tesla T4", 15360)
NODES = [NodeSpec("v100", (V100, Gpu(V100.model, V100.memory_mib, numa=1))),
         NodeSpec("t4", (T4,))]


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with FullStack(control_plane, NODES) as running:
        yield running


@pytest.fixture
def ns(stack: FullStack, request: pytest.FixtureRequest) -> Iterator[str]:
    name = stack.namespace(namespace_for_test(request.node.name))
    yield name
    stack.clear(name)


# -- one pod at a time ---------------------------------------------------------------------


def test_an_unmodified_gpu_pod_is_mutated_bound_and_allocated(stack: FullStack,
                                                              ns: str) -> None:
    created = stack.create_pod(ns, gpu_pod("cuda", gpu_container(gpu=1, gpumem=3000)))
    # The webhook's work, as the API server stored it.
    assert created["spec"]["schedulerName"] == stack.scheduler_name
    assert int(limits_of(created)["nvidia.com/gpu"]) == 1

    pod = stack.wait_allocated(ns, "cuda")
    assignment = assignment_of(pod)
    node = stack.nodes[pod["spec"]["nodeName"]]
    assert assignment.node == node.name
    (granted,) = assignment.containers["main"]
    assert granted.uuid in node.spec.uuids()
    assert (granted.memory_mib, granted.cores) == (3000, 0)

    admission = stack.admission(pod)
    assert admission.error is None
    grant = admission.containers["main"]
    # GetPreferredAllocation steered the kubelet to a slot of the assigned GPU.
    assert len(grant.device_ids) == 1 and grant.device_ids[0].startswith(f"{granted.uuid}-")
    assert grant.envs["NVIDIA_VISIBLE_DEVICES"] == granted.uuid
    assert grant.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert grant.envs["CUDA_DEVICE_SM_LIMIT"] == "0"
    assert pod["metadata"]["uid"] in grant.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"]
    assert "CUDA_OVERSUBSCRIBE" not in grant.envs
    assert pod["status"]["phase"] == "Running"


def test_a_deployment_pod_gets_a_gpu_count_and_its_compute_share(stack: FullStack,
                                                                 ns: str) -> None:
    """A pod made from a Deployment's template by its ReplicaSet: generateName, owner
    reference, pod-template-hash label; its container names only memory and cores."""
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "infer"}},
        "spec": {"automountServiceAccountToken": False,
                 "containers": [gpu_container("server", gpumem=2000, gpucores=25)]}}
    apps = f"/apis/apps/v1/namespaces/{ns}"
    deployment = stack.create(f"{apps}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "infer"}},
                 "template": template}})
    hashed = {"app": "infer", "pod-template-hash": "5d8f7c9b6"}
    replicaset = stack.create(f"{apps}/replicasets", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "infer-5d8f7c9b6", "labels": hashed, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "infer",
             "uid": deployment["metadata"]["uid"], "controller": True,
             "blockOwnerDeletion": True}]},
        "spec": {"replicas": 2, "selector": {"matchLabels": hashed},
                 "template": {**template, "metadata": {"labels": hashed}}}})
    names = []
    for _ in range(2):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"generateName": "infer-5d8f7c9b6-",
                            "labels": hashed,
                            "ownerReferences": [{
                                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                                "name": "infer-5d8f7c9b6", "uid": replicaset["metadata"]["uid"],
                                "controller": True, "blockOwnerDeletion": True}]},
               "spec": template["spec"]}
        created = stack.create_pod(ns, pod)
        names.append(created["metadata"]["name"])
        assert created["metadata"]["name"].startswith("infer-5d8f7c9b6-")
        assert created["spec"]["schedulerName"] == stack.scheduler_name
        # Only memory and cores were given: the webhook added the vGPU count.
        assert limits_of(created, "server")["nvidia.com/gpu"] == "1"

    for name in names:
        pod = stack.wait_allocated(ns, name)
        (granted,) = assignment_of(pod).containers["server"]
        assert (granted.memory_mib, granted.cores) == (2000, 25)
        envs = stack.admission(pod).containers["server"].envs
        assert envs["NVIDIA_VISIBLE_DEVICES"] == granted.uuid
        assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m"
        assert envs["CUDA_DEVICE_SM_LIMIT"] == "25"


def test_percentages_resolve_against_the_gpu_they_land_on(stack: FullStack, ns: str) -> None:
    # Two GPU sizes in the cluster: the webhook cannot resolve a bare percentage, so the
    # scheduler does, against the GPU it picks.
    created = stack.create_pod(ns, gpu_pod("half", gpu_container(gpu=1, gpumem_percentage=50)))
    assert "nvidia.com/gpumem-percentage" in limits_of(created)
    # Restricted to T4s, every GPU it may use has one size: the webhook resolves it.
    created_t4 = stack.create_pod(ns, gpu_pod(
        "half-t4", gpu_container(gpu=1, gpumem_percentage=50),
        annotations={USE_GPUTYPE: "T4"}))
    assert limits_of(created_t4)["nvidia.com/gpumem"] == str(T4.memory_mib // 2)
    assert "nvidia.com/gpumem-percentage" not in limits_of(created_t4)
    assert created_t4["metadata"]["annotations"][GPUMEM_PERCENTAGE] == '{"main":50}'

    sizes = {u: g.memory_mib for s in stack.node_specs for u, g in zip(s.uuids(), s.gpus,
                                                                       strict=True)}
    for name in ("half", "half-t4"):
        pod = stack.wait_allocated(ns, name)
        (granted,) = assignment_of(pod).containers["main"]
        assert granted.memory_mib == sizes[granted.uuid] // 2
        envs = stack.admission(pod).containers["main"].envs
        assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{sizes[granted.uuid] // 2}m"
        if name == "half-t4":
            assert granted.uuid in node_named(stack, "t4").uuids()


def test_a_two_gpu_container_gets_both_gpus_of_one_node(stack: FullStack, ns: str) -> None:
    stack.create_pod(ns, gpu_pod("pair", gpu_container(gpu=2, gpumem=8000, gpucores=50)))
    pod = stack.wait_allocated(ns, "pair")
    v100 = node_named(stack, "v100")
    assert pod["spec"]["nodeName"] == v100.name
    granted = assignment_of(pod).containers["main"]
    assert sorted(g.uuid for g in granted) == sorted(v100.uuids())
    envs = stack.admission(pod).containers["main"].envs
    assert envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(g.uuid for g in granted)
    assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == "8000m"
    assert envs["CUDA_DEVICE_SM_LIMIT"] == "50"


# -- GPU types -------------------------------------------------------------------------------


def test_use_and_nouse_gputype_are_respected(stack: FullStack, ns: str) -> None:
    t4, v100 = node_named(stack, "t4"), node_named(stack, "v100")
    wanted = {"on-t4": ({USE_GPUTYPE: "t4"}, t4),            # case-insensitive substring
              "not-v100": ({NOUSE_GPUTYPE: "V100"}, t4),
              "on-v100": ({USE_GPUTYPE: "Tesla V100"}, v100),
              "not-t4": ({NOUSE_GPUTYPE: "T4,A100"}, v100)}
    for name, (notes, _) in wanted.items():
        stack.create_pod(ns, gpu_pod(name, gpu_container(gpu=1, gpumem=1000),
                                     annotations=notes))
    stack.create_pod(ns, gpu_pod("on-a100", gpu_container(gpu=1, gpumem=1000),
                                 annotations={USE_GPUTYPE: "A100"}))

    for name, (_, node) in wanted.items():
        pod = stack.wait_allocated(ns, name)
        assert pod["spec"]["nodeName"] == node.name, name
        (granted,) = assignment_of(pod).containers["main"]
        assert granted.uuid in node.uuids()
        assert stack.admission(pod).containers["main"].envs["NVIDIA_VISIBLE_DEVICES"] == \
            granted.uuid

    messages = wait_until("a FailedScheduling event for the A100 pod",
                          lambda: failed_scheduling(stack, ns, "on-a100"), 20)
    assert re.match(r"0/\d+ nodes are available: ", messages[-1]), messages
    assert "GPU type excluded" in messages[-1]
    assert not stack.pod(ns, "on-a100")["spec"].get("nodeName")


# -- the 4paradigm field test ---------------------------------------------------------------


def test_ten_10000mib_replicas_on_two_32gib_gpus_six_run_four_wait(
        stack: FullStack, ns: str) -> None:
    """Published for k8s-vgpu-scheduler: 10 replicas of a pod asking for 10000 MiB on two
    32 GiB V100s: three fit on each GPU, the other four stay Pending with a reason. Then a
    deleted pod makes room for exactly one of them."""
    t4 = node_named(stack, "t4")
    stack.cordon(t4.name)
    try:
        names = [stack.create_pod(ns, {
            "metadata": {"generateName": "gpu-burn-", "labels": {"app": "gpu-burn"}},
            "spec": {"containers": [gpu_container(gpu=1, gpumem=10000)]}})["metadata"]["name"]
            for _ in range(10)]

        def settled() -> tuple[list[Obj], list[Obj]] | None:
            pods = [stack.pod(ns, n) for n in names]
            bound = [p for p in pods if p["spec"].get("nodeName")]
            pending = [p for p in pods if not p["spec"].get("nodeName")]
            done = all(allocated(p) for p in bound)
            waiting = all(failed_scheduling(stack, ns, p["metadata"]["name"]) for p in pending)
            return (bound, pending) if len(bound) == 6 and done and waiting else None

        bound, pending = wait_until("6 pods allocated and 4 pending with a reason", settled,
                                    60, interval=0.3, context=stack.logs)
        v100 = node_named(stack, "v100")
        per_gpu = Counter(g.uuid for p in bound for g in assignment_of(p).containers["main"])
        assert per_gpu == dict.fromkeys(v100.uuids(), 3)
        for pod in bound:
            assert pod["spec"]["nodeName"] == v100.name
            admission = stack.admission(pod)
            assert admission.error is None
            assert admission.containers["main"].envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "10000m"
            assert pod["status"]["phase"] == "Running"
        for pod in pending:
            assert pod["status"]["phase"] == "Pending"
            message = failed_scheduling(stack, ns, pod["metadata"]["name"])[-1]
            assert re.match(r"0/\d+ nodes are available: ", message), message
            assert "insufficient GPU memory" in message, message

        # Room for one more: a deleted pod lets exactly one pending pod in.
        gone = bound[0]["metadata"]["name"]
        stack.delete_pod(ns, gone)
        waiting = {p["metadata"]["name"] for p in pending}

        def one_let_in() -> list[Obj] | None:
            pods = [stack.pod(ns, n) for n in waiting]
            moved = [p for p in pods if bind_phase(p) == "success"]
            return moved or None

        (moved,) = wait_until("a pending pod bound after the delete", one_let_in, 30,
                              context=stack.logs)
        assert moved["spec"]["nodeName"] == v100.name
        assert stack.admission(moved).error is None
        still = [n for n in waiting if not stack.pod(ns, n)["spec"].get("nodeName")]
        assert len(still) == 3
    finally:
        stack.cordon(t4.name, False)


# -- what the webhook refuses and what it leaves alone --------------------------------------


def test_a_privileged_gpu_pod_is_denied_with_its_reason(stack: FullStack, ns: str) -> None:
    container = gpu_container(gpu=1, gpumem=1000)
    container["securityContext"] = {"privileged": True}
    with pytest.raises(ClusterError) as denied:
        stack.create_pod(ns, gpu_pod("root", container))
    message = str(denied.value)
    assert 'admission webhook "mutate.vgpu.io" denied the request' in message
    assert "container 'main' is privileged in a pod that asks for vGPUs" in message
    assert "drop securityContext.privileged" in message
    assert not stack.pods(ns)


def test_a_pod_without_gpus_passes_untouched(stack: FullStack, ns: str) -> None:
    # 1.20 drops matchConditions, so the webhook sees this pod and must let it be.
    created = stack.create_pod(ns, {"metadata": {"name": "web"}, "spec": {"containers": [
        {"name": "nginx", "image": "nginx", "resources": {"limits": {"cpu": "1"}}}]}})
    assert created["spec"]["schedulerName"] == "default-scheduler"
    assert "annotations" not in created["metadata"]
