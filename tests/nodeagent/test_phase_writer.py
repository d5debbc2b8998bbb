"""The agent's bind-phase writer: one queue per pod, retried with a capped back-off until
the pod is gone, late writes reported (issue 50)."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

import pytest

from tests.nodeagent.conftest import GPU1, NODE, phase, small_config
from tests.nodeagent.test_writer import Flaky
from tests.support.pods import bind_assigned, container, slices
from tests.support.pods import pod as pod_spec
from vgpu.annotations import BIND_PHASE, BIND_REASON
from vgpu.cluster.memory import MemoryCluster
from vgpu.errors import ClusterError
from vgpu_nodeagent.allocation.phase_queue import Overdue, PendingWrites
from vgpu_nodeagent.allocation.phases import Outcome, PhaseUpdate, PhaseWriter


def pod(cluster: MemoryCluster) -> None:
    cluster.create("pods", {"metadata": {"name": "p", "namespace": "ns",
                                         "annotations": {BIND_PHASE: "allocating"}}})


def running(writer: PhaseWriter) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=writer.run, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def test_phase_writer_retries_conflicts() -> None:
    cluster = Flaky(failures=3)
    pod(cluster)
    writer = PhaseWriter(cluster, max_backoff=0.01)
    stop, thread = running(writer)
    writer.submit(PhaseUpdate("ns", "p", "failed", "no container asked for 2"))
    assert writer.wait_idle(5)
    stop.set()
    thread.join()
    meta = cluster.get("pods", "p", "ns")["metadata"]["annotations"]
    assert (meta[BIND_PHASE], meta[BIND_REASON]) == ("failed", "no container asked for 2")
    assert cluster.patches == 4
    # Through pods/status, which the validating webhook is not registered for.
    assert cluster.through_status is True


def test_phase_writer_clears_an_old_reason_and_drops_deleted_pods() -> None:
    cluster = MemoryCluster()
    pod(cluster)
    cluster.patch_annotations("pods", "p", {BIND_REASON: "old"}, namespace="ns")
    writer = PhaseWriter(cluster)
    stop, thread = running(writer)
    writer.submit(PhaseUpdate("ns", "p", "success"))
    writer.submit(PhaseUpdate("ns", "gone", "success"))
    assert writer.wait_idle(5)
    stop.set()
    thread.join()
    meta = cluster.get("pods", "p", "ns")["metadata"]["annotations"]
    assert meta[BIND_PHASE] == "success" and BIND_REASON not in meta


def test_phase_writer_never_writes_a_phase_on_a_successor_of_the_name() -> None:
    cluster = MemoryCluster()
    pod(cluster)
    uid = cluster.get("pods", "p", "ns")["metadata"]["uid"]
    cluster.delete("pods", "p", "ns")
    pod(cluster)  # recreated: same name, another uid, still allocating
    writer = PhaseWriter(cluster, max_backoff=0.01)
    assert writer.attempt(PhaseUpdate("ns", "p", "success", uid=uid))[0] is Outcome.GONE
    assert cluster.get("pods", "p", "ns")["metadata"]["annotations"][BIND_PHASE] == (
        "allocating")


class Stuck(MemoryCluster):
    """Patches of pod ``stuck`` fail (``hang``: block until released) until
    :attr:`released` is set; every other pod's go through."""

    def __init__(self, *, hang: bool = False) -> None:
        super().__init__()
        self.released = threading.Event()
        self.hang = hang
        self.stuck_patches = 0

    def patch_annotations(self, kind: Any, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None, resource_version: str | None = None,
                          *, uid: str = "", status: bool = False,
                          conditions: Any = ()) -> dict[str, Any]:
        if name == "stuck" and not self.released.is_set():
            self.stuck_patches += 1
            if not self.hang:
                raise ClusterError("patch pod stuck: connection closed before an answer")
            self.released.wait(10)
        return super().patch_annotations(kind, name, annotations, namespace, resource_version,
                                         uid=uid, status=status, conditions=conditions)


def phase_of(cluster: MemoryCluster, name: str) -> str:
    return str(cluster.get("pods", name, "ns")["metadata"]["annotations"][BIND_PHASE])


def named(cluster: MemoryCluster, name: str) -> str:
    cluster.create("pods", {"metadata": {"name": name, "namespace": "ns",
                                         "annotations": {BIND_PHASE: "allocating"}}})
    return str(cluster.get("pods", name, "ns")["metadata"]["uid"])


def wait_for(check: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.01)


@pytest.mark.parametrize("hang", [False, True])
def test_one_pods_failing_write_holds_up_no_other_pods_and_is_never_given_up(
        hang: bool) -> None:
    """Issue 50, case 2: a pod whose write keeps failing (or hangs) backs off alone; the
    next pod's record goes out at once; the first is written once the API takes it."""
    cluster = Stuck(hang=hang)
    stuck, other = named(cluster, "stuck"), named(cluster, "other")
    writer = PhaseWriter(cluster, max_backoff=0.02)
    stop, thread = running(writer)
    try:
        writer.submit(PhaseUpdate("ns", "stuck", "success", uid=stuck))
        wait_for(lambda: cluster.stuck_patches >= (1 if hang else 5))
        writer.submit(PhaseUpdate("ns", "other", "success", uid=other))
        wait_for(lambda: phase_of(cluster, "other") == "success", 2.0)
        assert phase_of(cluster, "stuck") == "allocating"
        assert writer.counts()[0] == 1
        if not hang:
            # Far more than the 30 tries after which the serial writer gave up.
            wait_for(lambda: cluster.stuck_patches > 40)
        cluster.released.set()
        assert writer.wait_idle(5)
        assert phase_of(cluster, "stuck") == "success"
    finally:
        cluster.released.set()
        stop.set()
        thread.join()


def test_a_write_pending_past_the_bound_is_reported_once_and_forgotten_with_its_pod(
        ) -> None:
    cluster = Stuck()
    stuck = named(cluster, "stuck")
    reported: list[Overdue] = []
    writer = PhaseWriter(cluster, max_backoff=0.02, pending_warn=0.2,
                         on_overdue=reported.append)
    stop, thread = running(writer)
    try:
        writer.submit(PhaseUpdate("ns", "stuck", "success", uid=stuck))
        wait_for(lambda: reported)
        time.sleep(0.3)
        assert len(reported) == 1
        assert reported[0].update.uid == stuck and reported[0].waited > 0.2
        assert reported[0].attempts >= 1 and "connection closed" in reported[0].last_error
        assert writer.counts() == (1, 1)
        writer.forget(stuck)  # the pod watch shows it deleted
        tried = cluster.stuck_patches
        assert writer.wait_idle(1)
        time.sleep(0.3)  # room for a dozen more tries, were the pod not forgotten
        # An attempt taken before the forget may still go out; none starts after it.
        assert cluster.stuck_patches <= tried + 1
        assert writer.counts() == (0, 0)
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize(("failures", "waits"), [
    (1, [0.05]),
    (4, [0.05, 0.1, 0.2, 0.4]),
    (8, [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]),  # capped
])
def test_a_pods_backoff_doubles_to_its_cap_and_its_updates_keep_their_order(
        failures: int, waits: list[float]) -> None:
    pending = PendingWrites(max_backoff=1.0)
    first, second = PhaseUpdate("ns", "p", "allocating"), PhaseUpdate("ns", "p", "success")
    pending.add(first, 0.0)
    pending.add(second, 0.0)
    pending.add(PhaseUpdate("ns", "q", "success"), 0.0)
    now, got = 0.0, []
    for _ in range(failures):
        due = dict(pending.take_due(now))
        assert due["ns/p"] is first
        assert pending.take_due(now) == []  # one attempt in flight per pod
        got.append(pending.failed("ns/p", now, "boom"))
        now += got[-1]
    assert got == waits
    assert dict(pending.take_due(now))["ns/p"] is first
    pending.written("ns/p", now)
    assert dict(pending.take_due(now)) == {"ns/p": second}
    pending.written("ns/p", now)
    assert len(pending) == 1 and pending.next_due() is None  # q's attempt is in flight


class RefusesStatus(MemoryCluster):
    """Every ``pods/status`` patch of pod ``p1`` fails, as through a proxy dropping them."""

    def patch_annotations(self, kind: Any, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None, resource_version: str | None = None,
                          *, uid: str = "", status: bool = False,
                          conditions: Any = ()) -> dict[str, Any]:
        if status and name == "p1":
            raise ClusterError("patch pod p1: connection closed before an answer")
        return super().patch_annotations(kind, name, annotations, namespace, resource_version,
                                         uid=uid, status=status, conditions=conditions)


def agent_metrics(env: Any) -> str:
    port = env.agent.metrics_server.port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


def test_the_agent_warns_of_a_record_pending_past_the_bound_and_forgets_it_with_its_pod(
        make_env: Any) -> None:
    cluster = RefusesStatus()
    cluster.create("nodes", {"metadata": {"name": NODE}})
    env = make_env(small_config(phase_pending_warn_seconds=0.5), cluster=cluster)
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(cluster, pod_spec("p1", [container("main", 1, mem=3000, cores=30)]), NODE,
                  {"main": slices((GPU1, 3000, 30))})
    env.kubelet.admit_pod([1])
    wait_for(lambda: "vgpu_nodeagent_phase_writes_overdue 1.0" in agent_metrics(env))
    assert "vgpu_nodeagent_phase_writes_pending 1.0" in agent_metrics(env)
    wait_for(lambda: [e for e in cluster.events(name="p1") if e.reason == "BindPhasePending"])
    (warning,) = [e for e in cluster.events(name="p1") if e.reason == "BindPhasePending"]
    assert warning.type == "Warning" and "connection closed" in warning.message
    assert "vgpu_nodeagent_phase_writes_overdue_reported_total 1.0" in agent_metrics(env)
    assert phase(env, "p1")[0] == "allocating"
    cluster.delete("pods", "p1", "default")  # the pod is gone: nothing more to write
    wait_for(lambda: "vgpu_nodeagent_phase_writes_pending 0.0" in agent_metrics(env))
