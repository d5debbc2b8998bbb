"""MpsUser, table-driven: which GPU of a node a pod may join by its effective uid and its
neighbours' (as recorded at their placement), the GPUs' and nodes' modes; what the
assignment records; the FailedScheduling reason. Then a hypothesis property over random
arrivals and departures: no MPS GPU ever serves two uids at once."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import FakeClock
from tests.support.pods import bind_assigned
from vgpu import annotations as ann
from vgpu import builders, codecs, isolation_modes, mps_users
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import Assignment, GrantedDevice, assignment_of, encode_assignment
from vgpu.config import from_mapping
from vgpu.node_isolation import NodeIsolation
from vgpu_scheduler.host.scheduler import Scheduler
from vgpu_scheduler.plugins.gpu.mps_user import BARRED, MIXED, REASON

GPU0, GPU1 = "GPU-n-0", "GPU-n-1"
BINPACK = {"vgpu.io/gpu-scheduler-policy": "binpack"}   # the fuller GPU first, when allowed


@dataclass(frozen=True)
class Placed:
    """A pod already on the node: the uid its assignment records (None: none) and the uid
    its spec states (None: none)."""

    recorded: int | None = None
    spec: int | None = None
    gpu: str = GPU0
    cores: int = 20


@dataclass(frozen=True)
class Case:
    name: str
    placed: tuple[Placed, ...]
    #: The new pod's securityContext: pod-level and per container (name -> uid).
    pod_uid: int | None
    #: The GPU the pod lands on; None: it stays pending.
    lands: str | None
    containers: Mapping[str, int | None] = field(default_factory=lambda: {"main": None})
    mode: str = "mps"
    labels: Mapping[str, str] = field(default_factory=dict)
    #: The inventory's node-level choice (an ``auto`` node's).
    target: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    reason: str = REASON


U1000 = Placed(recorded=1000, spec=1000)
CASES = [
    Case("one uid: it joins", (U1000,), 1000, GPU0),
    Case("another uid: the other GPU", (U1000,), 2000, GPU1),
    Case("its uid unknown: a user of its own", (U1000,), None, GPU1),
    Case("the placed pod's uid unknown: nobody joins it", (Placed(),), 1000, GPU1),
    Case("both unknown: still two users", (Placed(),), None, GPU1),
    Case("a container's runAsUser wins over the pod's", (U1000,), 2000, GPU0,
         containers={"main": 1000}),
    Case("a container's runAsUser alone", (U1000,), None, GPU1, containers={"main": 3000}),
    Case("uid 0 is a uid like any other", (Placed(recorded=0, spec=0),), 0, GPU0),
    Case("hami-core: no MPS server, any users", (U1000,), 2000, GPU0, mode="hami-core"),
    Case("no isolation: no MPS server", (U1000,), 2000, GPU0, mode="none"),
    Case("mps-hami-core is MPS", (U1000,), 2000, GPU1, mode="mps-hami-core"),
    Case("MPS configured, its daemon down for now: its next pods are MPS clients",
         (U1000,), 2000, GPU1, mode="hami-core", labels={"vgpu.io/isolation": "mps"}),
    Case("auto that chose hami-core", (U1000,), 2000, GPU0, mode="hami-core",
         labels={"vgpu.io/isolation": "auto"}, target="hami-core"),
    Case("auto that chose mps-hami-core, running hami-core for now", (U1000,), 2000, GPU1,
         mode="hami-core", labels={"vgpu.io/isolation": "auto"}, target="mps-hami-core"),
    Case("auto whose agent does not say: it may run MPS", (U1000,), 2000, GPU1,
         mode="hami-core", labels={"vgpu.io/isolation": "auto"}),
    Case("no GPU left to its uid", (U1000, Placed(3000, 3000, gpu=GPU1)), 2000, None),
    Case("a placement from before uids were recorded reads the spec", (Placed(None, 1000),),
         1000, GPU0),
    Case("the recorded uid counts", (Placed(1000, None),), 1000, GPU0),
    Case("GPU containers of two uids fit no MPS GPU", (), None, None,
         containers={"a": 1000, "b": 2000}, reason=MIXED),
    Case("... but a hami-core one", (), None, GPU0, containers={"a": 1000, "b": 2000},
         mode="hami-core"),
    Case("the rule turned off", (U1000,), 2000, GPU0,
         config={"isolation": {"mps": {"placeByUser": False}}}),
]


def setup_node(case: Case) -> tuple[Scheduler, MemoryCluster]:
    config = from_mapping(dict(case.config))
    gpus = tuple(dataclasses.replace(d, isolation=case.mode)
                 for d in builders.devices("n", 2, memory_mib=16384))
    cluster = MemoryCluster()
    node = builders.node("n", gpus, heartbeat=FakeClock().now, labels=dict(case.labels))
    if case.target is not None:
        node["metadata"]["annotations"][ann.NODE_GPUS] = codecs.encode_inventory(
            codecs.NodeInventory(gpus, isolation=NodeIsolation(case.target, auto=True)))
    cluster.create("nodes", node)
    for i, placed in enumerate(case.placed):
        spec = {} if placed.spec is None else {"securityContext": {"runAsUser": placed.spec}}
        obj = builders.pod(f"placed-{i}", [builders.container(
            gpus=1, gpumem=2000, cores=placed.cores)], **spec)
        slices = {"main": (GrantedDevice(placed.gpu, 2000, placed.cores),)}
        text = encode_assignment(Assignment(node="n", containers=slices,
                                            run_as_user=placed.recorded))
        bind_assigned(cluster, obj, "n", slices, assignment_text=text)
        cluster.patch_annotations("pods", f"placed-{i}", {ann.BIND_PHASE: ann.PHASE_SUCCESS})
    return Scheduler(config, cluster, clock=FakeClock()), cluster


def new_pod(name: str, pod_uid: int | None, containers: Mapping[str, int | None],
            cores: int = 20) -> dict[str, Any]:
    items = []
    for cname, uid in containers.items():
        item = builders.container(cname, gpus=1, gpumem=2000, cores=cores)
        if uid is not None:
            item["securityContext"] = {"runAsUser": uid}
        items.append(item)
    spec = {} if pod_uid is None else {"securityContext": {"runAsUser": pod_uid}}
    return builders.pod(name, items, annotations=BINPACK, **spec)


def test_enough_cases() -> None:
    assert len(CASES) >= 15 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_which_gpu_a_pod_may_join(case: Case) -> None:
    sched, cluster = setup_node(case)
    cluster.create("pods", new_pod("new", case.pod_uid, case.containers))
    sched.run_until_idle()
    assignment = assignment_of(cluster.get("pods", "new", "default"))
    if case.lands is None:
        assert assignment is None
        (event,) = [e for e in cluster.events(name="new") if e.reason == "FailedScheduling"]
        assert case.reason in event.message, event.message
        return
    assert assignment is not None
    assert {g.uuid for gs in assignment.containers.values() for g in gs} == {case.lands}
    # The uid the pod runs as is recorded; nothing when it is unknown or mixed.
    user = mps_users.effective(cluster.get("pods", "new", "default"), set(case.containers), "")
    assert assignment.run_as_user == user.uid


def test_a_barred_gpu_is_named_when_the_rest_does_not_fit() -> None:
    # GPU0 serves uid 1000; GPU1 serves 2000, the new pod's, but is too full for it.
    case = Case("", (U1000, Placed(2000, 2000, gpu=GPU1, cores=90)), 2000, None)
    sched, cluster = setup_node(case)
    cluster.create("pods", new_pod("new", 2000, {"main": None}))
    sched.run_until_idle()
    (event,) = [e for e in cluster.events(name="new") if e.reason == "FailedScheduling"]
    assert BARRED in event.message and "insufficient GPU cores" in event.message


def test_preemption_can_free_a_gpu_of_another_user() -> None:
    """The filter reads the pods of the node it is given: preemption's simulation without
    the victim sees its GPU open to the urgent pod's uid."""
    case = Case("", (U1000, Placed(3000, 3000, gpu=GPU1)), 2000, None)
    sched, cluster = setup_node(case)
    urgent = new_pod("urgent", 2000, {"main": None})
    urgent["spec"]["priority"] = 1000
    cluster.create("pods", urgent)
    sched.run_until_idle()
    left = {p["metadata"]["name"] for p in cluster.list("pods").items}
    assert left & {"placed-0", "placed-1"} != {"placed-0", "placed-1"}, "no victim evicted"


# -- the property ---------------------------------------------------------------------------

MODES = ("mps", "mps-hami-core", "hami-core", "mps")
#: An arrival: (uid or None, where it says so, GPU count, cores); a departure: an index.
ARRIVAL = st.tuples(st.sampled_from([None, 0, 1000, 1000, 2000, 3000]),
                    st.sampled_from(["pod", "container"]), st.sampled_from([1, 1, 2]),
                    st.sampled_from([10, 20, 40]))
STEPS = st.lists(st.one_of(ARRIVAL.map(lambda a: ("arrive", a)),
                           st.integers(0, 40).map(lambda i: ("leave", i))),
                 min_size=10, max_size=45)


def _mps_users_per_gpu(cluster: MemoryCluster, modes: Mapping[str, str]) -> dict[str, set[str]]:
    """Per MPS GPU, the users its pods run as, read from their specs (unknown: the pod)."""
    out: dict[str, set[str]] = {}
    for pod in cluster.list("pods").items:
        assignment = assignment_of(pod)
        if assignment is None:
            continue
        user = mps_users.effective(pod, set(assignment.containers), pod["metadata"]["name"])
        key = f"uid {user.uid}" if user.uid is not None else f"pod {user.pod}"
        for uuid in assignment.gpu_ids:
            if isolation_modes.uses_mps(modes[uuid]):
                out.setdefault(uuid, set()).add(key)
    return out


def _settle(cluster: MemoryCluster) -> list[str]:
    """Mark every newly bound pod allocated (no agent runs here); the bound pods' names."""
    bound = []
    for pod in cluster.list("pods").items:
        if not pod["spec"].get("nodeName"):
            continue
        name = pod["metadata"]["name"]
        bound.append(name)
        if pod["metadata"]["annotations"].get(ann.BIND_PHASE) != ann.PHASE_SUCCESS:
            cluster.patch_annotations("pods", name, {ann.BIND_PHASE: ann.PHASE_SUCCESS})
    return sorted(bound)


def _run(steps: list[tuple[str, Any]]) -> int:
    """Play ``steps`` on four nodes of two GPUs (three in MPS modes), checking after every
    step that each MPS GPU serves one user; returns how many times an MPS GPU held more
    than one pod."""
    clock = FakeClock()
    cluster = MemoryCluster()
    modes: dict[str, str] = {}
    for i, mode in enumerate(MODES):
        gpus = tuple(dataclasses.replace(d, isolation=mode)
                     for d in builders.devices(f"n{i}", 2, memory_mib=16384))
        cluster.create("nodes", builders.node(f"n{i}", gpus, heartbeat=clock.now))
        modes.update({d.uuid: mode for d in gpus})
    sched = Scheduler(from_mapping({}), cluster, clock=clock)
    live: list[str] = []
    together = 0
    for i, (kind, arg) in enumerate(steps):
        if kind == "leave":
            if live:
                cluster.delete("pods", live[arg % len(live)], "default")
        else:
            uid, where, count, cores = arg
            container = builders.container(gpus=count, gpumem=1000, cores=cores)
            spec: dict[str, Any] = {}
            if uid is not None and where == "container":
                container["securityContext"] = {"runAsUser": uid}
            elif uid is not None:
                spec["securityContext"] = {"runAsUser": uid}
            cluster.create("pods", builders.pod(f"p{i}", [container], **spec))
        sched.run_until_idle()
        live = _settle(cluster)
        for uuid, users in _mps_users_per_gpu(cluster, modes).items():
            assert len(users) == 1, (f"step {i}", uuid, users)
        together += _crowded(cluster, modes)
    return together


def _crowded(cluster: MemoryCluster, modes: Mapping[str, str]) -> int:
    count: dict[str, int] = {}
    for pod in cluster.list("pods").items:
        assignment = assignment_of(pod)
        for uuid in assignment.gpu_ids if assignment is not None else ():
            if isolation_modes.uses_mps(modes[uuid]):
                count[uuid] = count.get(uuid, 0) + 1
    return sum(1 for n in count.values() if n > 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_no_mps_gpu_ever_serves_two_users_at_once(steps: list[tuple[str, Any]]) -> None:
    """After every arrival and departure, every GPU in an MPS mode holds pods of one uid
    (or one pod of unknown uid); GPUs in hami-core take anyone."""
    _run(steps)


def test_the_property_puts_pods_of_one_user_together() -> None:
    """A long seeded run of the same: the rule keeps users apart without keeping every pod
    alone (pods of one uid share MPS GPUs)."""
    rng = random.Random(11)
    steps: list[tuple[str, Any]] = []
    for _ in range(150):
        if rng.random() < 0.3:
            steps.append(("leave", rng.randrange(40)))
        else:
            steps.append(("arrive", (rng.choice([None, 1000, 1000, 2000]),
                                     rng.choice(["pod", "container"]), rng.choice([1, 1, 2]),
                                     rng.choice([10, 20, 40]))))
    assert _run(steps) > 20
