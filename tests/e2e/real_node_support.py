"""Pods that a real node runs, and what the real-node tests read back from it.

The pods are GPU pods as users write them (limits under ``nvidia.com/``, no scheduler,
no annotations) whose containers print their environment and wait; the image is the
node's local busybox (nothing is pulled) and the pods use the host's network (the node
has no CNI). A container's environment comes back through ``kubectl logs``, the agent's
view of the kubelet's pod resources through its ``/metrics``.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.images import BUSYBOX
from tests.e2e.harness import FullStack, Gpu, NodeSpec
from tests.e2e.harness_pods import namespace_for_test
from tests.e2e.harness_processes import http_get
from vgpu.codecs import Assignment

A100 = Gpu("NVIDIA A100-SXM4-40GB", 40960)
#: One real node with two A100s on two NUMA nodes.
TWO_A100 = NodeSpec("real", (A100, Gpu(A100.model, A100.memory_mib, numa=1)), real=True)


@contextlib.contextmanager
def real_stack(control_plane: ControlPlane, node: NodeSpec) -> Iterator[FullStack]:
    """The full stack on one real node, the agent reading pod resources every 0.5 s."""
    config = {"nodeagent": {"podResourcesSeconds": 0.5}}
    with FullStack(control_plane, [node], config=config, agent_metrics=True) as running:
        yield running


def namespace_per_test(stack: FullStack, test_name: str) -> Iterator[str]:
    """A namespace per test, cleared at once afterwards: a real 1.20 kubelet takes ~8 s to
    finish a graceful delete, and over a minute when it leaves the container to its
    once-a-minute garbage collection. No test needs another's pods gone."""
    name = stack.namespace(namespace_for_test(test_name))
    yield name
    stack.clear(name, force_after=0)


def only_node(stack: FullStack) -> str:
    (name,) = stack.nodes  # the harness suffixes the spec's name
    return name

#: Prints the environment, then waits; SIGTERM ends it at once (PID 1 ignores signals it
#: does not handle, and a deleted pod would otherwise wait out its grace period).
WAIT = "trap 'exit 0' TERM; env; echo ENV-END; while true; do sleep 1; done"


def real_container(name: str, **limits: str | int) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX, "imagePullPolicy": "Never",
            "command": ["sh", "-c", WAIT],
            "resources": {"limits": {f"nvidia.com/{k.replace('_', '-')}": str(v)
                                     for k, v in limits.items()}}}


def real_pod(name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    """``restartPolicy: Never``: the tests force-delete their pods, and a 1.20 kubelet may
    still restart a force-deleted pod's container, whose devices it has already freed; it
    then calls Allocate again, which the agent, seeing no pod identity in it, would match
    against whatever pod is in allocation at the time."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"hostNetwork": True, "restartPolicy": "Never",
                     "containers": list(containers)}}


def container_env(stack: FullStack, namespace: str, pod: str, container: str) -> dict[str, str]:
    """The environment the container started with, from ``kubectl logs``."""
    text = stack.cp.kubectl("logs", "-n", namespace, pod, "-c", container).stdout
    if "ENV-END" not in text:
        raise AssertionError(f"{namespace}/{pod} {container} has not printed its environment "
                             f"yet: {text!r}")
    lines = text.split("ENV-END", 1)[0].splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def expected_env(assignment: Assignment, container: str) -> dict[str, str]:
    """What Allocate hands the container for its slices (visible GPUs, memory, cores)."""
    slices = assignment.containers[container]
    env = {"NVIDIA_VISIBLE_DEVICES": ",".join(s.uuid for s in slices),
           "CUDA_DEVICE_SM_LIMIT": str(max(s.cores for s in slices))}
    env.update({f"CUDA_DEVICE_MEMORY_LIMIT_{i}": f"{s.memory_mib}m"
                for i, s in enumerate(slices)})
    return env


def agent_metrics(stack: FullStack, node: str) -> dict[tuple[str, tuple[tuple[str, str], ...]],
                                                        float]:
    """The node agent's samples, by name and sorted labels ({} when it does not answer)."""
    text = http_get(f"http://127.0.0.1:{stack.nodes[node].metrics_port}/metrics") or ""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def kubelet_view(samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float],
                 namespace: str) -> dict[tuple[str, str], dict[str, int]]:
    """The agent's ``vgpu_container_kubelet_devices`` of one namespace:
    (pod, container) -> GPU uuid -> device IDs the kubelet lists."""
    out: dict[tuple[str, str], dict[str, int]] = collections.defaultdict(dict)
    for (name, labels), value in samples.items():
        got = dict(labels)
        if name == "vgpu_container_kubelet_devices" and got["namespace"] == namespace:
            out[(got["pod"], got["container"])][got["uuid"]] = int(value)
    return dict(out)


def assigned_view(assignments: Mapping[str, Assignment]) -> dict[tuple[str, str], dict[str, int]]:
    """The same shape from the pods' assignments: slices per GPU per container."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for pod, assignment in assignments.items():
        for container, slices in assignment.containers.items():
            out[(pod, container)] = dict(collections.Counter(s.uuid for s in slices))
    return out
