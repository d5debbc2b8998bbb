"""The whole scheduler on the in-memory cluster: binding, the permit gate, restarts.

The gate that holds a node's next GPU pod while its agent could confuse it with one in
flight until the agent reports (or the timeout passes), a restart that rebuilds it from
annotations, and bindings that fail or lose a race. Separate from ``test_e2e``, which
covers where pods land and what is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import vgpu.annotations as ann
from tests.scheduler.e2e_support import allocated, gpu_node, node_of, setup, uid_of
from tests.scheduler.helpers import FakeClock
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config
from vgpu.errors import ClusterError
from vgpu_scheduler.host.scheduler import Scheduler


def test_permit_gate_holds_a_nodes_second_gpu_pod_until_success() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 1)])
    # all three on the one GPU, with different limits: confusable
    for i, name in enumerate(("first", "second", "third")):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=1000 + i,
                                                                      cores=10)]))
    sched.run_until_idle()
    assert node_of(cluster, "first") == "n1"
    assert node_of(cluster, "second") is None and node_of(cluster, "third") is None
    assert sched.waiting_pods() == {"default/second": "n1", "default/third": "n1"}
    # the waiting pods hold their reservation: three slices on the node
    info = sched.cache.node_info("n1")
    assert info is not None and sum(u.tasks for u in info.usages) == 3

    allocated(cluster, "first")
    sched.run_until_idle()
    assert node_of(cluster, "second") == "n1" and node_of(cluster, "third") is None

    allocated(cluster, "second", ann.PHASE_FAILED)
    sched.run_until_idle()
    assert node_of(cluster, "third") == "n1"

    # a gate held by a pod that never reports opens after permitTimeoutSeconds
    cluster.create("pods", builders.pod("fourth", [builders.container(gpumem=1000, cores=10)]))
    sched.run_until_idle()
    assert node_of(cluster, "fourth") is None
    clock.advance(Config().scheduler.permit_timeout_seconds)
    sched.run_until_idle()
    assert node_of(cluster, "fourth") == "n1"


def test_deleting_the_in_flight_pod_opens_the_gate() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1)])
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    assert node_of(cluster, "b") is None
    cluster.delete("pods", "a", "default")
    sched.run_until_idle()
    assert node_of(cluster, "b") == "n1"


def test_other_nodes_are_not_held_up_by_a_gated_node() -> None:
    config = Config(default_node_policy="spread")
    sched, cluster, _ = setup([gpu_node("n1", 1), gpu_node("n2", 1)], config)
    for i, name in enumerate(("a", "b", "c")):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=1000 + i)]))
    sched.run_until_idle()
    # spread: a → n1, b → n2 (both bound at once), c waits for one of them
    assert {node_of(cluster, "a"), node_of(cluster, "b")} == {"n1", "n2"}
    assert len(sched.waiting_pods()) == 1


def test_restart_rebuilds_from_annotations() -> None:
    cluster = MemoryCluster()
    sched, cluster, clock = setup([gpu_node("n1", 1)], cluster=cluster)
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=10000)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"
    # a new scheduler process: no memory of the old one's decisions
    fresh = Scheduler(Config(), cluster, clock=clock)
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=10000)]))
    cluster.create("pods", builders.pod("c", [builders.container(gpumem=6000)]))
    fresh.run_until_idle()
    assert node_of(cluster, "b") is None  # 10000 + 10000 > 16384: no double booking
    # c fits, but a is still allocating: the rebuilt gate holds c
    assert fresh.waiting_pods() == {"default/c": "n1"}
    allocated(cluster, "a")
    fresh.run_until_idle()
    assert node_of(cluster, "c") == "n1"


class FlakyBind(MemoryCluster):
    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        if self.failures:
            self.failures -= 1
            raise ClusterError("the API server said no (HTTP 500)")
        super().bind(namespace, name, node, annotations, uid=uid)


def test_failed_binding_forgets_and_retries() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 1)], cluster=FlakyBind())
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=16000)]))
    sched.run_until_idle()
    assert node_of(cluster, "p") is None
    info = sched.cache.node_info("n1")
    assert info is not None and info.usages[0].tasks == 0  # the assumption was forgotten
    assert "binding rejected" in cluster.events(name="p", reason="FailedScheduling")[0].message
    clock.advance(1)
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n1"


class BoundMeanwhile(MemoryCluster):
    """Another binder wins the race: its Binding lands just before ours (409)."""

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        if name == "p":
            super().bind(namespace, name, "n2", {})
        super().bind(namespace, name, node, annotations, uid=uid)


def test_a_conflict_on_binding_is_not_retried_and_the_watch_tells_the_truth() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1), gpu_node("n2", 1)], cluster=BoundMeanwhile())
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=16000)]))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n2"
    assert "p" not in {e.name for e in cluster.events(reason="FailedScheduling")}
    assert uid_of(cluster, "p") not in sched.queue
    rec = sched.cache.pod(uid_of(cluster, "p"))
    assert rec is not None and rec.node == "n2" and not rec.assumed
    n1 = sched.cache.node_info("n1")
    assert n1 is not None and n1.usages[0].tasks == 0  # our assumption was forgotten


def test_a_pod_held_at_permit_that_starts_terminating_gives_its_room_back() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1)])
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    assert sched.waiting_pods() == {"default/b": "n1"}
    # A finalizer keeps b while it is deleted: it stays, with a deletionTimestamp.
    b = cluster.get("pods", "b", "default")
    b["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    cluster.replace("pods", b)
    sched.run_until_idle()
    assert sched.waiting_pods() == {}
    info = sched.cache.node_info("n1")
    assert info is not None and info.usages[0].memory_mib == 1000  # a's only


class Later:
    """Bindings wait until the test runs them."""

    def __init__(self) -> None:
        self.tasks: list[Callable[[], None]] = []

    def submit(self, task: Callable[[], None]) -> None:
        self.tasks.append(task)

    def close(self, cancel: bool = False) -> None:
        self.tasks.clear()


def test_a_binding_for_a_replaced_pod_binds_nothing() -> None:
    cluster, later = MemoryCluster(), Later()
    cluster.create("nodes", gpu_node("n1", 1))
    sched = Scheduler(Config(), cluster, clock=FakeClock(), binder=later)
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=2000, cores=20)]))
    sched.run_until_idle()
    # Its StatefulSet replaces p (another uid, more memory) before the binding goes out.
    cluster.delete("pods", "p", "default")
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=12000, cores=80)]))
    sched.run_until_idle()
    first, second = later.tasks
    first()  # the Binding names the first pod's uid: refused, nothing bound
    assert node_of(cluster, "p") is None
    second()
    got = codecs.assignment_of(cluster.get("pods", "p", "default"))
    assert got is not None and got.containers["main"][0].memory_mib == 12000
    sched.run_until_idle()
    info = sched.cache.node_info("n1")
    assert info is not None and info.usages[0].memory_mib == 12000
