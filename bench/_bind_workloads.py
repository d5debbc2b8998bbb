"""The pods and nodes of ``bench/bind.py``: a mixed vGPU workload, whole GPUs that both
kube-scheduler and vgpu-scheduler understand, and fractional ones (``gpumem``, ``gpucores``).
"""

from __future__ import annotations

import random
from typing import Any

import vgpu.annotations as ann
from vgpu import builders, codecs
from vgpu.cluster.port import Obj

#: The workloads by name: (count, namespace, scheduler name) -> pods.
KINDS = ("mixed", "whole", "fractional")


def _pod(i: int, spec: dict[str, Any], namespace: str, scheduler: str) -> Obj:
    pod = builders.pod(f"p-{i:05d}", [spec], namespace=namespace, scheduler_name=scheduler)
    pod["spec"]["automountServiceAccountToken"] = False
    return pod


def mixed(count: int, namespace: str, scheduler: str, seed: int = 7) -> list[Obj]:
    """1 GPU with 4-16 GiB and 0-50 % compute, some 2-GPU pods and some asking for a
    percentage of GPU memory (a fixed seed)."""
    rng = random.Random(seed)
    c = builders.container
    pods = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.7:
            spec = c(gpumem=rng.randrange(4096, 16385, 1024), cores=rng.choice((0, 10, 25, 50)))
        elif roll < 0.85:
            spec = c(gpus=2, gpumem=rng.randrange(4096, 16385, 1024), cores=rng.choice((0, 25)))
        else:
            spec = c(percent=rng.choice((10, 25, 50)))
        pods.append(_pod(i, spec, namespace, scheduler))
    return pods


def whole(count: int, namespace: str, scheduler: str) -> list[Obj]:
    """``nvidia.com/gpu: 1`` and nothing else: a whole GPU, to either scheduler."""
    return [_pod(i, builders.container(gpus=1), namespace, scheduler) for i in range(count)]


def fractional(count: int, namespace: str, scheduler: str, seed: int = 7) -> list[Obj]:
    """One GPU each, 4-16 GiB of its memory and 10-50 % of its compute (a fixed seed)."""
    rng = random.Random(seed)
    return [_pod(i, builders.container(gpumem=rng.randrange(4096, 16385, 1024),
                                       cores=rng.choice((10, 25, 50))), namespace, scheduler)
            for i in range(count)]


def pods(kind: str, count: int, namespace: str, scheduler: str) -> list[Obj]:
    fn = {"mixed": mixed, "whole": whole, "fractional": fractional}[kind]
    return fn(count, namespace, scheduler)


def nodes(prefix: str, count: int, gpus: int, heartbeat: float) -> list[Obj]:
    """GPU nodes with a vgpu inventory (for vgpu-scheduler) that also advertise
    ``nvidia.com/gpu`` in allocatable (for kube-scheduler)."""
    out = []
    for i in range(count):
        name = f"{prefix}-{i:04d}"
        node = builders.node(name, builders.devices(name, gpus), heartbeat=heartbeat)
        for part in ("allocatable", "capacity"):
            node["status"][part]["nvidia.com/gpu"] = str(gpus)
        out.append(node)
    return out


#: The namespace of the pods already bound before a burst (``--placed``).
PLACED_NAMESPACE = "placed"


def placed(count: int, nodes: list[Obj], gpus: int, scheduler: str) -> list[Obj]:
    """Pods already running when the scheduler starts, as either scheduler would have left
    them: whole GPUs (``nvidia.com/gpu: 1``, which kube-scheduler counts on allocatable),
    bound (``nodeName``), with vgpu's assignment and ``bind-phase: success`` (which vgpu
    counts), spread over the nodes and every GPU of each but its last, so that the burst
    still has a free GPU on every node."""
    out = []
    per_node = max(1, gpus - 1)
    for k in range(count):
        node = nodes[k % len(nodes)]["metadata"]["name"]
        gpu = (k // len(nodes)) % per_node
        assignment = codecs.Assignment(node=node, containers={
            "main": (codecs.GrantedDevice(f"GPU-{node}-{gpu}", 40960, 100),)})
        pod = _pod(k, builders.container(gpus=1), PLACED_NAMESPACE, scheduler)
        pod["metadata"]["annotations"] = {ann.ASSIGNMENT: codecs.encode_assignment(assignment),
                                          ann.BIND_PHASE: ann.PHASE_SUCCESS}
        pod["spec"]["nodeName"] = node
        out.append(pod)
    return out
