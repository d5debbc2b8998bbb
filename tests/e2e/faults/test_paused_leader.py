"""A leader paused past its lease (a long GC pause, a frozen VM, SIGSTOP) binds nothing
when it wakes up, whatever its watches show it first (issue 36, case 2).

Replicas A and B elect over a Lease (4 s, renew deadline 3 s, retry 0.5 s). A leads with
pod ``q`` waiting for room; A is frozen; B takes over; a backlog of pod watch events piles
up, then the higher-priority pod ``p`` and a new one-GPU node with room for one of them
arrive, and B binds one of them there; A is resumed. A's node watch shows the new node
before its pod watch reaches B's Binding, so an unfenced A would bind the other pod onto
the same GPU. Which pod B places first is not fixed: both come back to B's queue when the
node appears, and, as in kube-scheduler's queue, the one whose back-off ended first leaves
it first (issue 46). So the checks hold either way: A sends no write after it wakes (its
requests go through a fault proxy that forwards them all and logs each), it exits, and no
GPU is over-committed. A's reads of its Lease are slowed after it wakes, so that it
learns late that it lost the Lease: without the fence it then binds (seen every time).
"""

from __future__ import annotations

import os
import signal
import time

from tests.e2e.faults.conftest import FaultEnv
from tests.e2e.faults.proxy import FaultProxy
from tests.e2e.faults.rules import MUTATING, Action, Fault
from tests.e2e.scheduler_kube_support import (
    bound,
    check_not_overcommitted,
    delete_now,
    gpu_pod,
    priority_classes,
    wait_for,
)
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.cluster.twins import given_identity
from vgpu.kube import adapter

ELECTION = ("--leader-elect", "--lease-name=vgpu-scheduler", "--lease-duration=4",
            "--renew-deadline=3", "--retry-period=0.5")
#: Each write's time in flight: a new leader waits this beyond the old one's renew deadline.
CONFIG = {"scheduler": {"writeTimeoutSeconds": 2.0}}
#: Rounds of the whole scenario; more by hand (VGPUDEV_FAULT_ROUNDS=10).
ROUNDS = int(os.environ.get("VGPUDEV_FAULT_ROUNDS", "1"))
BACKLOG = 300


def test_a_paused_leader_binds_nothing_when_it_wakes(env: FaultEnv) -> None:
    kube, namespace = env.kube, env.namespace
    classes = priority_classes(kube, "fault")
    make_class = next(classes)
    high = make_class(1000)
    c = builders.container
    filler = kube.create("pods", builders.pod("filler", [c(gpus=None, cpu="10m")],
                                              namespace=namespace, scheduler_name="nobody"))
    try:
        with FakeAgents(kube, namespace):
            for round_ in range(ROUNDS):
                one_round(env, round_, high, filler["metadata"]["name"])
    finally:
        next(classes, None)


def one_round(env: FaultEnv, round_: int, high: str, filler: str) -> None:
    kube, namespace, name = env.kube, env.namespace, env.scheduler_name
    c = builders.container
    lease = f"--lease-namespace={namespace}"
    proxy, through_proxy = env.proxy()
    a = env.launch(*ELECTION, lease, f"--identity=a{round_}", tag=f"a{round_}",
                   config=CONFIG, kubeconfig=through_proxy)
    wait_for(lambda: a.ready() == "leader", 30, "a leads", a.log)
    b = env.launch(*ELECTION, lease, f"--identity=b{round_}", tag=f"b{round_}",
                   config=CONFIG)
    wait_for(lambda: b.ready() == "follower", 30, "b follows", b.log)
    q, p = f"q{round_}", f"p{round_}"
    kube.create("pods", gpu_pod(q, namespace, name, c(gpumem=10000)))
    # q waits: no node has room for it yet.
    wait_for(lambda: a.metric("vgpu_scheduler_schedule_attempts_total") > 0, 30,
             "q tried", a.log)
    a.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: b.ready() == "leader", 15, "b takes over", b.log)
        # The backlog comes first in A's pod watch, so that B's Binding is behind it while
        # the node watch has only the new node.
        for i in range(BACKLOG):
            kube.patch_annotations("pods", filler, {"fault.vgpu.io/tick": str(i)}, namespace)
        pod = gpu_pod(p, namespace, name, c(gpumem=10000))
        pod["spec"]["priorityClassName"] = high
        kube.create("pods", pod)
        node = env.nodes(1, memory_mib=16000)
        # Liveness only, and either pod (see above): generous for a loaded CI host.
        wait_for(lambda: {p, q} & set(on_node(kube, namespace, node)), 90,
                 "p or q bound", b.log)
    finally:
        # A learns that it lost the Lease from its next read of it: slowed down, that
        # read leaves A's other threads seconds to act on what their watches show first,
        # which is what the fence has to stop. (Only reads: a renewal A was about to send
        # when it froze must get its answer, a conflict, within its deadline.)
        proxy.rules.append(lambda r: Fault(Action.DELAY, 3.0)
                           if r.method == "GET" and "/leases/" in r.path else None)
        resumed = time.time()
        a.proc.send_signal(signal.SIGCONT)
    # A finds it lost the lease and exits, having sent nothing.
    assert a.proc.wait(30) == 1, a.log.read_text()[-4000:]
    late = writes_since(proxy, resumed)
    assert not late, (late, a.log.read_text()[-4000:])
    assert lease_holder(kube, namespace) == f"b{round_}"
    check_not_overcommitted(kube, namespace, [node])
    b.stop()
    # The next round starts from an empty namespace (but for the filler).
    for pod_name in (q, p):
        delete_now(kube, namespace, pod_name)
    kube.delete("nodes", node)


def lease_holder(kube: adapter.KubeCluster, namespace: str) -> str:
    """The --identity of the Lease's holder (without its per-process nonce)."""
    spec = kube.get("leases", "vgpu-scheduler", namespace)["spec"]
    return given_identity(str(spec.get("holderIdentity") or ""))


def on_node(kube: adapter.KubeCluster, namespace: str, node: str) -> list[str]:
    return [pod for pod, where in bound(kube, namespace).items() if where == node]


def writes_since(proxy: FaultProxy, since: float) -> list[str]:
    """Every write that reached the proxy at or after ``since``, but a renewal of the
    Lease that the API server refused (409): a conditional write that changed nothing,
    which a leader that was frozen between reading its Lease and writing it sends."""
    return [f"{e.method} {e.target} -> {e.status}" for e in proxy.log
            if e.arrived >= since and e.method in MUTATING
            and not (e.method == "PUT" and "/leases/" in e.target and e.status == 409)]
