"""FaultDomain, table-driven: which GPU of a node a pod may join, by its
``vgpu.io/fault-domain``, its neighbours' (as recorded at their placement), the namespaces'
defaults and the GPUs' modes; what the assignment records; the FailedScheduling reason."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.scheduler.helpers import FakeClock
from tests.support.pods import bind_assigned
from vgpu import annotations as ann
from vgpu import builders, fault_domains
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import Assignment, GrantedDevice, assignment_of, encode_assignment
from vgpu.config import Config, from_mapping
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.gpu.fault_domain import BARRED, REASON

GPU0, GPU1 = "GPU-n-0", "GPU-n-1"
BINPACK = {"vgpu.io/gpu-scheduler-policy": "binpack"}   # the fuller GPU first, when allowed
#: Every pod here runs as one uid, so that MPS's one user per GPU (MpsUser, its own tests)
#: keeps nobody apart and the fault domains alone decide.
ONE_USER = {"securityContext": {"runAsUser": 1000}}


@dataclass(frozen=True)
class Placed:
    """A pod already running on the node: its namespace, the scope its assignment records
    (None: none) and its annotation as it reads now."""

    namespace: str
    recorded: str | None = None
    annotation: str | None = None
    gpu: str = GPU0
    cores: int = 20


@dataclass(frozen=True)
class Case:
    name: str
    placed: tuple[Placed, ...]
    namespace: str
    annotation: str | None
    #: The GPU the pod lands on; None: it stays pending.
    lands: str | None
    mode: str = "mps"
    labels: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)


A_NS = Placed("a", "namespace")
A_ANY = Placed("a", "any")
B_ANY = Placed("b", "any")

CASES = [
    Case("both trust anyone", (A_ANY,), "b", "any", GPU0),
    Case("both trust anyone, neither said so", (Placed("a"),), "b", None, GPU0),
    Case("the placed pod keeps to its namespace", (A_NS,), "b", "any", GPU1),
    Case("the new pod keeps to its namespace", (A_ANY,), "b", "namespace", GPU1),
    Case("one namespace, both keep to it", (A_NS,), "a", "namespace", GPU0),
    Case("its namespace's pod trusts anyone, so it may join", (A_ANY,), "a", "namespace",
         GPU0),
    Case("another namespace's pod is there too", (A_ANY, B_ANY), "a", "namespace", GPU1),
    Case("hami-core: each pod its own fault domain", (A_NS,), "b", "any", GPU0,
         mode="hami-core"),
    Case("no isolation shares faults", (A_NS,), "b", "any", GPU1, mode="none"),
    Case("an inventory from before modes (unknown) shares faults", (A_NS,), "b", "any", GPU1,
         mode="unknown"),
    Case("MPS configured, its daemon down for now: still one fault domain", (A_NS,), "b",
         "any", GPU1, mode="hami-core", labels={"vgpu.io/isolation": "mps"}),
    Case("the combined mode is MPS", (A_NS,), "b", "any", GPU1, mode="mps-hami-core"),
    Case("no GPU left to it", (A_NS, Placed("c", "namespace", gpu=GPU1)), "b", "any", None),
    Case("the scope recorded at placement counts, not the annotation edited since",
         (Placed("a", "namespace", annotation="any"),), "b", "any", GPU1),
    Case("an annotation added after placement does not count either",
         (Placed("a", None, annotation="namespace"),), "b", "any", GPU0),
    Case("the namespace's default, for a pod that recorded none", (Placed("a"),), "b",
         "any", GPU1, config={"namespaceDefaults": ["a=namespace"]}),
    Case("the cluster's default keeps the new pod to its namespace", (Placed("a"),), "b",
         None, GPU1, config={"default": "namespace"}),
    Case("a pod's own word wins over its namespace's default", (Placed("a"),), "b",
         "any", GPU0, config={"default": "namespace", "namespaceDefaults": ["a=any"]}),
]


def setup_node(case: Case) -> tuple[Scheduler, MemoryCluster]:
    config = from_mapping({"isolation": {"faultDomains": dict(case.config)}})
    gpus = tuple(dataclasses.replace(d, isolation=case.mode)
                 for d in builders.devices("n", 2, memory_mib=16384))
    cluster = MemoryCluster()
    cluster.create("nodes", builders.node("n", gpus, heartbeat=FakeClock().now,
                                          labels=dict(case.labels)))
    for i, placed in enumerate(case.placed):
        notes = {} if placed.annotation is None else {"vgpu.io/fault-domain":
                                                          placed.annotation}
        obj = builders.pod(f"placed-{i}", [builders.container(gpus=1, gpumem=2000,
                                                              cores=placed.cores)],
                           namespace=placed.namespace, annotations=notes, **ONE_USER)
        slices = {"main": (GrantedDevice(placed.gpu, 2000, placed.cores),)}
        text = encode_assignment(Assignment(node="n", containers=slices,
                                            fault_domain=placed.recorded))
        bind_assigned(cluster, obj, "n", slices, assignment_text=text)
        cluster.patch_annotations("pods", f"placed-{i}", {ann.BIND_PHASE: ann.PHASE_SUCCESS},
                                  placed.namespace)
    return Scheduler(config, cluster, clock=FakeClock()), cluster


def submit(sched: Scheduler, cluster: MemoryCluster, namespace: str,
           annotation: str | None, cores: int = 20) -> Assignment | None:
    notes = dict(BINPACK)
    if annotation is not None:
        notes["vgpu.io/fault-domain"] = annotation
    cluster.create("pods", builders.pod("new", [builders.container(
        gpus=1, gpumem=2000, cores=cores)], namespace=namespace, annotations=notes,
        **ONE_USER))
    sched.run_until_idle()
    return assignment_of(cluster.get("pods", "new", namespace))


def test_enough_cases() -> None:
    assert len(CASES) >= 15 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_which_gpu_a_pod_may_join(case: Case) -> None:
    sched, cluster = setup_node(case)
    assignment = submit(sched, cluster, case.namespace, case.annotation)
    if case.lands is None:
        assert assignment is None
        (event,) = [e for e in cluster.events(name="new") if e.reason == "FailedScheduling"]
        assert REASON in event.message
        return
    assert assignment is not None
    assert [g.uuid for g in assignment.containers["main"]] == [case.lands]
    # What the pod stated is recorded in its assignment; nothing when it stated nothing.
    assert assignment.fault_domain == case.annotation


def test_a_barred_gpu_is_named_when_the_rest_does_not_fit() -> None:
    # GPU0 is barred (a's namespace-only pod), GPU1 is too full for the new pod: VGPU's
    # diagnosis names both reasons.
    case = Case("", (A_NS, Placed("c", "any", gpu=GPU1, cores=90)), "b", "any", None)
    sched, cluster = setup_node(case)
    assert submit(sched, cluster, "b", "any") is None
    (event,) = [e for e in cluster.events(name="new") if e.reason == "FailedScheduling"]
    assert BARRED in event.message and "insufficient GPU cores" in event.message


def test_a_pod_that_keeps_to_its_namespace_joins_its_namespace_not_an_empty_gpu() -> None:
    """Score: two nodes alike (one GPU taken by a pod that trusts anyone, one free), the
    taken GPU of y by the new pod's own namespace: it joins that one, and leaves x's free
    GPU open to everyone. The node policy cannot tell x and y apart (equal totals), and
    without the fault domain's score the first node, x, would win."""
    clock = FakeClock()
    cluster = MemoryCluster()
    for name in ("x", "y"):
        gpus = tuple(dataclasses.replace(d, isolation="mps")
                     for d in builders.devices(name, 2, memory_mib=16384))
        cluster.create("nodes", builders.node(name, gpus, heartbeat=clock.now))
    for name, node, namespace in (("theirs", "x", "c"), ("mine", "y", "a")):
        obj = builders.pod(name, [builders.container(gpus=1, gpumem=2000, cores=20)],
                           namespace=namespace, **ONE_USER)
        slices = {"main": (GrantedDevice(f"GPU-{node}-0", 2000, 20),)}
        bind_assigned(cluster, obj, node, slices, assignment_text=encode_assignment(
            Assignment(node=node, containers=slices, fault_domain="any")))
        cluster.patch_annotations("pods", name, {ann.BIND_PHASE: ann.PHASE_SUCCESS},
                                  namespace)
    sched = Scheduler(Config(), cluster, clock=clock)
    placed = submit(sched, cluster, "a", "namespace")
    assert placed is not None and placed.node == "y"
    assert [g.uuid for g in placed.containers["main"]] == ["GPU-y-0"]


def test_preemption_can_free_a_gpu_a_lower_priority_pod_keeps_to_its_namespace() -> None:
    """The filter reads the pods of the node it is given, so preemption's simulation
    without the victims sees the GPU open again."""
    case = Case("", (A_NS, Placed("c", "namespace", gpu=GPU1)), "b", "any", None)
    sched, cluster = setup_node(case)
    cluster.create("pods", builders.pod("urgent", [builders.container(
        gpus=1, gpumem=2000, cores=20)], namespace="b", priority=1000, **ONE_USER))
    sched.run_until_idle()
    left = {p["metadata"]["name"] for p in cluster.list("pods").items}
    assert left & {"placed-0", "placed-1"} != {"placed-0", "placed-1"}, "no victim evicted"
    pod = cluster.get("pods", "urgent", "b")
    assert pod["status"].get("nominatedNodeName") == "n" or pod["spec"].get("nodeName") == "n"


def test_no_gpu_ever_holds_two_pods_that_do_not_trust_each_other() -> None:
    """Many pods of three namespaces, each scope at random, arriving and leaving on nodes
    of every mode: on every GPU that shares faults, every two pods trust each other."""
    rng = random.Random(7)
    clock = FakeClock()
    cluster = MemoryCluster()
    modes = {}
    for i, mode in enumerate(["mps", "mps", "none", "hami-core", "mps-hami-core", "mps"]):
        gpus = tuple(dataclasses.replace(d, isolation=mode)
                     for d in builders.devices(f"n{i}", 2, memory_mib=16384))
        cluster.create("nodes", builders.node(f"n{i}", gpus, heartbeat=clock.now))
        modes.update({d.uuid: mode for d in gpus})
    sched = Scheduler(Config(), cluster, clock=clock)
    live: list[tuple[str, str]] = []
    for i in range(160):
        if live and rng.random() < 0.3:
            name, namespace = live.pop(rng.randrange(len(live)))
            cluster.delete("pods", name, namespace)
        namespace = rng.choice(["a", "b", "c"])
        notes = {"vgpu.io/fault-domain": rng.choice(["any", "namespace"])} \
            if rng.random() < 0.7 else {}
        cluster.create("pods", builders.pod(f"p{i}", [builders.container(
            gpus=rng.choice([1, 1, 2]), gpumem=1000, cores=rng.choice([10, 20, 30]))],
            namespace=namespace, annotations=notes, **ONE_USER))
        sched.run_until_idle()
        pod = cluster.get("pods", f"p{i}", namespace)
        if pod["spec"].get("nodeName"):
            cluster.patch_annotations("pods", f"p{i}", {ann.BIND_PHASE: ann.PHASE_SUCCESS},
                                      namespace)
            live.append((f"p{i}", namespace))
    on_gpu: dict[str, list[fault_domains.Tenant]] = {}
    for name, namespace in live:
        pod = cluster.get("pods", name, namespace)
        assignment = assignment_of(pod)
        assert assignment is not None
        # What each pod said (nobody edited an annotation here), not what was recorded.
        scope, _ = fault_domains.effective(pod["metadata"].get("annotations"), namespace,
                                           fault_domains.Defaults())
        tenant = fault_domains.Tenant(namespace, scope, name)
        for uuid in assignment.gpu_ids:
            on_gpu.setdefault(uuid, []).append(tenant)
    shared = [uuid for uuid, tenants in on_gpu.items() if len(tenants) > 1
              and fault_domains.shared(modes[uuid])]
    assert len(shared) > 5, "the run should put several pods together"
    for uuid in shared:
        tenants = on_gpu[uuid]
        for a in tenants:
            assert fault_domains.blocker(a, tenants) is None, (uuid, tenants)
