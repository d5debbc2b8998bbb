"""vgpu on a real node: the kubelet v1.20.2 and containerd run the pods.

The whole path, with nothing of ours standing in for Kubernetes: ``vgpu webhook`` mutates
the pod, ``vgpu scheduler`` binds it, the real kubelet admits it and calls the node
agent's GetPreferredAllocation and Allocate over its own device-plugin socket, and
containerd starts the containers with the environment Allocate answered, which the tests
read back with ``kubectl logs``. The agent reads the kubelet's pod-resources API; its view
must match the assignments. The node (tests/controlplane/real_node.py) has two fake
A100s; its pods use the host's network and the local busybox image.

Pods carry the webhook's derived quota requests: the real kubelet admits them, because
they sit on app containers only (two tests below show both sides of that).

The kubelet stand-in's tests (test_full_stack.py) stay: they are faster and reach error
paths a real kubelet never takes. The kubelet restart is last: it changes the node.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.images import BUSYBOX
from tests.e2e.full_stack_support import assignment_of
from tests.e2e.harness import FullStack, bind_phase, wait_until
from tests.e2e.real_node_support import (
    A100,
    TWO_A100,
    agent_metrics,
    assigned_view,
    container_env,
    expected_env,
    kubelet_view,
    namespace_per_test,
    only_node,
    real_container,
    real_pod,
    real_stack,
)
from vgpu import quota_charge
from vgpu.annotations import PHASE_SUCCESS
from vgpu_nodeagent.kubelet.podresources import PodResourcesClient, from_response

NODE = TWO_A100


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane) -> Iterator[FullStack]:
    with real_stack(control_plane, NODE) as running:
        yield running


@pytest.fixture
def ns(stack: FullStack, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from namespace_per_test(stack, request.node.name)


node_name = only_node


def node_uuids(stack: FullStack) -> list[str]:
    return stack.nodes[node_name(stack)].spec.uuids()


def logged_env(stack: FullStack, ns: str, pod: str, container: str) -> dict[str, str]:
    """The container's environment once it has printed it."""
    env: dict[str, dict[str, str]] = {}

    def printed() -> bool:
        try:
            env["got"] = container_env(stack, ns, pod, container)
        except Exception:  # not started, or not printed yet
            return False
        return True

    wait_until(f"{ns}/{pod} {container} printed its environment", printed, 30,
               interval=0.3, context=stack.logs)
    return env["got"]


def registrations(stack: FullStack) -> int:
    """How often the node's agent has registered with a kubelet (from its log)."""
    log = stack.workdir / f"nodeagent-{node_name(stack)}.log"
    count = 0
    for line in log.read_text(errors="replace").splitlines():
        if '"registered with the kubelet"' in line:
            count = max(count, int(json.loads(line).get("registrations", 0)))
    return count


def test_an_unmodified_gpu_pod_runs_with_its_allocation_in_its_environment(
        stack: FullStack, ns: str) -> None:
    created = stack.create_pod(ns, real_pod("cuda", real_container("main", gpu=1,
                                                                    gpumem=3000)))
    assert created["spec"]["schedulerName"] == stack.scheduler_name  # the webhook's doing

    pod = stack.wait_allocated(ns, "cuda", timeout=60)
    assert bind_phase(pod) == PHASE_SUCCESS  # written by the agent in the kubelet's Allocate
    assignment = assignment_of(pod)
    (granted,) = assignment.containers["main"]
    assert granted.uuid in node_uuids(stack) and granted.memory_mib == 3000
    env = logged_env(stack, ns, "cuda", "main")
    assert expected_env(assignment, "main").items() <= env.items()
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert env["CUDA_DEVICE_MEMORY_SHARED_CACHE"].endswith(
        f"{pod['metadata']['uid']}_main.cache")
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] and status["restartCount"] == 0

    # Deleted, the pod leaves the kubelet's pod resources, as the agent reads them.
    node = node_name(stack)
    wait_until("the agent sees the pod's devices in the kubelet",
               lambda: ("cuda", "main") in kubelet_view(agent_metrics(stack, node), ns), 30,
               interval=0.3, context=stack.logs)
    stack.clear(ns, force_after=0)
    wait_until("its devices gone from the kubelet's pod resources",
               lambda: not kubelet_view(agent_metrics(stack, node), ns), 30, interval=0.3,
               context=stack.logs)


def test_containers_and_gpus_get_their_own_slices_keyed_by_name(
        stack: FullStack, ns: str) -> None:
    # Same device count, different memory: only the container's name tells them apart.
    stack.create_pod(ns, real_pod("pair", real_container("small", gpu=1, gpumem=1000),
                                  real_container("large", gpu=1, gpumem=5000)))
    stack.create_pod(ns, real_pod("multi", real_container("main", gpu=2, gpumem=2000)))
    assignments = {name: assignment_of(stack.wait_allocated(ns, name, timeout=60))
                   for name in ("pair", "multi")}

    for pod, container in (("pair", "small"), ("pair", "large"), ("multi", "main")):
        env = logged_env(stack, ns, pod, container)
        want = expected_env(assignments[pod], container)
        assert {k: env.get(k) for k in want} == want, (pod, container)
        assert env["CUDA_DEVICE_MEMORY_SHARED_CACHE"].endswith(f"_{container}.cache")
    assert [s.memory_mib for s in assignments["pair"].containers["large"]] == [5000]
    multi = assignments["multi"].containers["main"]
    assert sorted(s.uuid for s in multi) == sorted(node_uuids(stack))  # distinct GPUs
    env = logged_env(stack, ns, "multi", "main")
    assert env["NVIDIA_VISIBLE_DEVICES"].split(",") == [s.uuid for s in multi]
    assert (env["CUDA_DEVICE_MEMORY_LIMIT_0"], env["CUDA_DEVICE_MEMORY_LIMIT_1"]) == \
        ("2000m", "2000m")


def test_the_agents_view_of_the_kubelets_pod_resources_matches_the_assignment(
        stack: FullStack, ns: str) -> None:
    stack.create_pod(ns, real_pod("one", real_container("main", gpu=1, gpumem=1000)))
    stack.create_pod(ns, real_pod("two", real_container("a", gpu=1, gpumem=1000),
                                  real_container("b", gpu=2, gpumem=1000)))
    assignments = {name: assignment_of(stack.wait_allocated(ns, name, timeout=60))
                   for name in ("one", "two")}
    want = assigned_view(assignments)
    node = node_name(stack)

    def agent_agrees() -> bool:
        samples = agent_metrics(stack, node)
        return kubelet_view(samples, ns) == want and \
            samples.get(("vgpu_nodeagent_pod_resources_up", ())) == 1

    wait_until("the agent's pod-resources view equals the assignments", agent_agrees, 30,
               interval=0.3, context=stack.logs)
    assert agent_metrics(stack, node)[("vgpu_nodeagent_pod_resources_mismatches", ())] == 0

    # The kubelet itself, asked directly: the same device IDs, ours (<uuid>-<slot>).
    listed = from_response(PodResourcesClient(stack.nodes[node].real.pod_resources_socket)
                           .list(), "nvidia.com/gpu")
    mine = {(d.pod, d.container): d.gpus(node_uuids(stack)) for d in listed
            if d.namespace == ns}
    assert mine == {key: tuple(sorted(u for u, n in gpus.items() for _ in range(n)))
                    for key, gpus in want.items()}
    assert not [e for e in stack.events(ns, "two") if e.get("reason") == "GPUAssignmentMismatch"]


def test_the_kubelet_runs_a_pod_whose_gpu_init_container_is_charged_on_its_app_container(
        stack: FullStack, ns: str) -> None:
    # The init container names only the count, which the node advertises: a 1.20 kubelet
    # admits it; had the derived requests been written on it, it would refuse the pod.
    init = {**real_container("warm", gpu=1), "command": ["sh", "-c", "env; echo ENV-END"]}
    pod = real_pod("warmed", real_container("main", gpu=1, gpumem=2000))
    pod["spec"]["initContainers"] = [init]
    created = stack.create_pod(ns, pod)
    main, = created["spec"]["containers"]
    assert {k: v for k, v in main["resources"]["requests"].items() if k in quota_charge.NAMES} == {
        # The whole-GPU init container is exclusive (HAMi writes gpucores 100 for it), and
        # does not nest into main's 2000 MiB slice: both are charged.
        quota_charge.VGPUS: "2", quota_charge.MEMORY: str(A100.memory_mib + 2000),
        quota_charge.CORES: "100"}
    assert all(not k.startswith("vgpu.io/")
               for k in created["spec"]["initContainers"][0]["resources"]["limits"])
    assignment = assignment_of(stack.wait_allocated(ns, "warmed", timeout=60))
    assert sorted(s.memory_mib for c in assignment.containers.values() for s in c) == [
        2000, A100.memory_mib]


def test_the_kubelet_drops_derived_requests_of_app_containers_not_of_init_containers(
        stack: FullStack, ns: str) -> None:
    """What the placement of the derived requests rests on, shown with pods the webhook
    passes untouched (no GPU resource) and placed on the node directly: the 1.20 kubelet
    leaves out an app container's requests for resources its node does not advertise,
    but counts an init container's (fixed in Kubernetes 1.31)."""
    charge = {quota_charge.MEMORY: "1"}

    def placed(name: str, *, init: bool) -> dict[str, object]:
        busy = {"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never",
                "command": ["sh", "-c", "sleep 3600"]}
        charged = {**busy, "name": "charged", "command": ["true"],
                   "resources": {"limits": dict(charge), "requests": dict(charge)}}
        spec: dict[str, object] = {"nodeName": node_name(stack), "hostNetwork": True,
                                   "restartPolicy": "Never", "terminationGracePeriodSeconds": 0}
        if init:
            spec.update(initContainers=[charged], containers=[busy])
        else:
            spec.update(containers=[{**charged, "command": busy["command"]}])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}

    stack.create_pod(ns, placed("on-app", init=False))
    stack.create_pod(ns, placed("on-init", init=True))
    stack.wait_pod(ns, "on-app", "running", lambda p: p["status"].get("phase") == "Running",
                   timeout=60)
    refused = stack.wait_pod(ns, "on-init", "refused by the kubelet",
                             lambda p: p["status"].get("phase") == "Failed", timeout=60)
    assert refused["status"]["reason"] == f"OutOf{quota_charge.MEMORY}"


def test_a_kubelet_restart_keeps_running_pods_and_the_agent_registers_again(
        stack: FullStack, ns: str) -> None:
    stack.create_pod(ns, real_pod("before", real_container("main", gpu=1, gpumem=4000)))
    before = stack.wait_allocated(ns, "before", timeout=60)
    env_before = logged_env(stack, ns, "before", "main")
    container_id = before["status"]["containerStatuses"][0]["containerID"]
    registered = registrations(stack)
    node = stack.nodes[node_name(stack)]

    node.real.restart_kubelet()
    wait_until("the agent registered with the new kubelet",
               lambda: registrations(stack) > registered, 30, context=stack.logs)

    # The running pod kept its container (same id, no restart) and its allocation.
    after = stack.wait_pod(ns, "before", "still running after the kubelet restart",
                           lambda p: p["status"].get("phase") == "Running", timeout=30)
    status = after["status"]["containerStatuses"][0]
    assert (status["containerID"], status["restartCount"]) == (container_id, 0)
    assert logged_env(stack, ns, "before", "main") == env_before
    want = assigned_view({"before": assignment_of(after)})
    wait_until("the new kubelet's pod resources still list the pod's devices",
               lambda: kubelet_view(agent_metrics(stack, node.name), ns) == want, 30,
               interval=0.3, context=stack.logs)

    # A new pod after the restart is allocated through the new registration.
    stack.create_pod(ns, real_pod("after", real_container("main", gpu=1, gpumem=2000)))
    new = stack.wait_allocated(ns, "after", timeout=60)
    env = logged_env(stack, ns, "after", "main")
    assert expected_env(assignment_of(new), "main").items() <= env.items()
