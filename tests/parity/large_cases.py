"""Large cases for the differential test against kube-scheduler: above 100 nodes, where how
many nodes a scheduler scores decides where a pod goes (:func:`generate_large`). A case is
a :class:`~tests.parity.random_cases.Case` whose ``best`` names the node both schedulers
must bind the new pod to.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from tests.parity.random_cases import GPU, HOSTNAME, TAINTS, ZONE, Case, NodeSpec, PodSpec


def _maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


#: How many feasible nodes a large case leaves at most: kube-scheduler finds (and scores)
#: at least 100 feasible nodes, so with no more both schedulers weigh every one of them.
LARGE_FEASIBLE = 100


def generate_large(seed: int, index: int) -> Case:
    """Large case ``index`` of ``seed``: 101 to 130 alike, empty nodes, of which 60 to 100
    fit the new pod (the others carry a NoSchedule taint it does not tolerate, are
    cordoned or take no more pods), and one of those its soft rules single out: the only
    node with the label its preferred node affinity asks for, or the only one without a
    pod its preferred anti-affinity avoids. A scheduler that scores fewer than all the
    feasible nodes (vgpu's former 64, in binpack or rotating order) misses that node
    whenever it is not among them; kube-scheduler v1.20, which finds at least 100, and
    vgpu now, weigh them all. Sometimes a GPU pod (vgpu's GPU policy then scores too, and
    must not outvote the preference)."""
    rng = random.Random(f"vgpu-parity-large:{seed}:{index}")
    count = rng.randint(101, 130)
    fitting = sorted(rng.sample(range(count), rng.randint(60, LARGE_FEASIBLE)))
    best = rng.choice(fitting)
    anti = _maybe(rng, 0.5)
    gpu = _maybe(rng, 0.3)
    nodes = []
    for i in range(count):
        labels = {ZONE: f"z{i % 3}"}
        if not anti and i == best:
            labels["pick"] = "yes"
        taints: tuple[Mapping[str, str], ...] = ()
        unschedulable, pods = False, "110"
        if i not in fitting:
            roll = rng.random()
            if roll < 0.4:
                taints = (TAINTS[0],)
            elif roll < 0.7:
                unschedulable = True
            else:
                pods = "0"
        nodes.append(NodeSpec(labels, taints, unschedulable,
                              {"cpu": "4", "memory": "4Gi", "pods": pods}, 1 if gpu else 0))
    existing: tuple[PodSpec, ...] = ()
    if anti:
        existing = tuple(PodSpec({"app": "a"}, {"containers": [{
            "name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]},
            i) for i in fitting if i != best)
        preference: dict[str, Any] = {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": rng.randint(1, 100), "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "a"}},
                    "topologyKey": HOSTNAME}}]}}
    else:
        preference = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": rng.randint(1, 100), "preference": {"matchExpressions": [
                {"key": "pick", "operator": "In", "values": ["yes"]}]}}]}}
    resources: dict[str, Any] = {"requests": {"cpu": "100m"}}
    if gpu:
        resources["limits"] = {GPU: "1"}
    pod = PodSpec({"app": "a"}, {"containers": [{"name": "main", "image": "busybox",
                                                 "resources": resources}],
                                 "affinity": preference})
    return Case(seed, index, tuple(nodes), existing, pod, best=best)
