"""`vgpu scheduler` replicas on a real kube-apiserver: leader election by a Lease.

Two replicas, one schedules while the other keeps warm caches and takes over within
the lease duration when the leader is killed; a leader that loses its Lease exits; bad
election flags are refused without a traceback. The setting is the one of
``test_scheduler_kube``.
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time
from typing import Any

from tests.controlplane.cluster import ControlPlane
from tests.e2e.scheduler_kube_support import ROOT, bound, check_not_overcommitted, gpu_pod, wait_for
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.kube import adapter

# --- leader election ---------------------------------------------------------------------

ELECTION = ("--leader-elect", "--lease-name=vgpu-scheduler", "--lease-duration=4",
            "--renew-deadline=3", "--retry-period=0.5")
#: Each write's time in flight: what a new leader waits beyond the old one's renew
#: deadline, counted from when it last saw the Lease renewed (longer here than the lease
#: minus the renew deadline, so that the wait shows).
WRITE_TIMEOUT = 2.0
CONFIG = {"scheduler": {"writeTimeoutSeconds": WRITE_TIMEOUT}}


def lease_holder(kube: adapter.KubeCluster, namespace: str) -> str:
    lease = kube.request_json(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/vgpu-scheduler",
        "get lease")
    return str(lease["spec"].get("holderIdentity") or "")


def test_two_replicas_one_schedules_and_the_other_takes_over(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    node_names = [nodes(2) for _ in range(3)]
    c = builders.container
    with FakeAgents(kube, namespace):
        a = launch(*ELECTION, f"--lease-namespace={namespace}", "--identity=a", tag="a",
                   config=CONFIG)
        a_state = a.wait_ready()
        b = launch(*ELECTION, f"--lease-namespace={namespace}", "--identity=b", tag="b",
                   config=CONFIG)
        b_state = b.wait_ready()
        wait_for(lambda: lease_holder(kube, namespace) in ("a", "b"), 10, "a leader")
        # The holder reads "leader" once its elector set it leading, a moment after its
        # Lease write: not the instant the Lease shows it.
        wait_for(lambda: {a.ready(), b.ready()} == {"leader", "follower"}, 10,
                 f"one leader, one follower (first {a_state}, {b_state})")
        leader, follower = (a, b) if a.ready() == "leader" else (b, a)
        for i in range(10):
            kube.create("pods", gpu_pod(f"first-{i}", namespace, scheduler_name, c(gpumem=500)))
        wait_for(lambda: len(bound(kube, namespace)) == 10, 30, "first pods bound", leader.log)
        # A binding's count follows its answer, which can come after the watch shows it.
        wait_for(lambda: leader.metric("vgpu_scheduler_bindings_total", result="success") == 10,
                 10, "the leader counts its ten bindings", leader.log)
        assert follower.metric("vgpu_scheduler_bindings_total", result="success") == 0
        assert follower.metric("vgpu_scheduler_schedule_attempts_total") == 0
        assert (leader.metric("vgpu_scheduler_leader"), follower.metric(
            "vgpu_scheduler_leader")) == (1, 0)
        # The follower's caches are warm: it counts what the leader placed.
        assert sum(follower.metric("vgpu_scheduler_node_gpu_tasks", node=n)
                   for n in node_names) == 10

        killed = time.monotonic()
        leader.stop(signal.SIGKILL)
        for i in range(10):
            kube.create("pods", gpu_pod(f"then-{i}", namespace, scheduler_name,
                                        c(gpumem=500)))
        wait_for(lambda: follower.ready() == "leader", 30, "takeover", follower.log)
        took = time.monotonic() - killed
        # The old leader renewed less than the renew deadline before the kill (else it had
        # stopped), and the follower saw it no earlier: it leads no sooner than the write
        # timeout after the kill, and, from when it saw that renewal, the renew deadline
        # and the write timeout later (or the lease and a retry, if longer). The slack is
        # for a loaded machine: the bound that matters is that no fixed 35 s is waited.
        assert took < max(4 + 0.5, 3 + WRITE_TIMEOUT) + 0.5 + 5, f"takeover after {took:.1f} s"
        assert took > WRITE_TIMEOUT, f"took over after {took:.1f} s: before the old writes landed"
        wait_for(lambda: len(bound(kube, namespace)) == 20, 30, "all pods bound", follower.log)
        wait_for(lambda: follower.metric("vgpu_scheduler_bindings_total",
                                         result="success") >= 10, 10,
                 "the new leader counts its bindings", follower.log)
        bound_by_follower = {r: follower.metric("vgpu_scheduler_bindings_total", result=r)
                             for r in ("success", "conflict", "error")}
        # Counted once its answers are in (a full cold run once read 8: the watch had shown
        # the last two before their answers came back); the log says which path each took.
        assert bound_by_follower["success"] == 10, (bound_by_follower,
                                                    follower.log.read_text()[-6000:])
        assert lease_holder(kube, namespace) == ("b" if leader is a else "a")
    check_not_overcommitted(kube, namespace, node_names)
    # A clean stop gives the Lease up at once.
    assert follower.stop() == 0
    assert lease_holder(kube, namespace) == ""


def test_a_leader_that_loses_its_lease_stops(kube: adapter.KubeCluster, namespace: str,
                                             launch: Any) -> None:
    sched = launch(*ELECTION, f"--lease-namespace={namespace}", "--identity=me")
    wait_for(lambda: sched.ready() == "leader", 30, "leading", sched.log)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/vgpu-scheduler"
    # Someone else takes the Lease (as after a network partition): the old leader must
    # stop scheduling and exit, and a fresh process rebuilds its state.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lease = kube.request_json("GET", path, "get lease")
        lease["spec"].update(holderIdentity="usurper", leaseDurationSeconds=60,
                             renewTime=dt.datetime.now(dt.UTC).strftime(
                                 "%Y-%m-%dT%H:%M:%S.%fZ"))
        try:
            kube.request_json("PUT", path, "update lease", body=lease)
            break
        except Exception:  # the leader renewed in between: try again
            continue
    assert sched.proc.wait(15) == 1
    assert "lost the lease" in sched.log.read_text()
    assert lease_holder(kube, namespace) == "usurper"


def test_bad_flags_are_errors_without_a_traceback(control_plane: ControlPlane) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vgpu.cli", "scheduler", "--kubeconfig",
         str(control_plane.kubeconfig), "--leader-elect", "--lease-duration=2",
         "--renew-deadline=5"], capture_output=True, text=True, timeout=60, cwd=ROOT,
        check=False)
    assert proc.returncode == 2
    assert "--renew-deadline < --lease-duration" in proc.stderr
    assert "Traceback" not in proc.stderr
