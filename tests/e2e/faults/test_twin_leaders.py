"""Two replicas started with one ``--identity`` never both lead (issue 50, case 3).

Replica A (binpack) and replica B (``spread``, as during a config rollout where old and
new pods overlap) are both started with ``--identity=twin``. Each writes the Lease under
that identity plus a nonce of its own, so one leads and the other follows, and 10 pods of
4000 MiB fill the 8 slots of two 16000 MiB GPUs and no more. Then a write that is not the
leader's renews the Lease under the leader's own holder identity (what a process cloned
with its memory would send): the leader steps down and exits, and the follower takes over.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from tests.e2e.faults.conftest import FaultEnv
from tests.e2e.scheduler_kube_support import (
    SchedulerProcess,
    bound,
    check_not_overcommitted,
    gpu_pod,
    wait_for,
)
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.cluster.twins import given_identity
from vgpu.errors import ConflictError

ELECTION = ("--leader-elect", "--lease-name=vgpu-scheduler", "--lease-duration=4",
            "--renew-deadline=3", "--retry-period=0.5", "--identity=twin")
CONFIG: dict[str, Any] = {"scheduler": {"bindInDoubtSeconds": 2.0}}
SPREAD: dict[str, Any] = {**CONFIG, "defaultNodePolicy": "spread",
                          "defaultGpuPolicy": "spread"}


def lease(env: FaultEnv) -> dict[str, Any]:
    return env.kube.get("leases", "vgpu-scheduler", env.namespace)


def test_two_replicas_given_one_identity_elect_one_leader(env: FaultEnv) -> None:
    kube, namespace, name = env.kube, env.namespace, env.scheduler_name
    nodes = [env.nodes(1, memory_mib=16000) for _ in range(2)]
    lease_ns = f"--lease-namespace={namespace}"
    with FakeAgents(kube, namespace):
        a = env.launch(*ELECTION, lease_ns, tag="a", config=CONFIG)
        wait_for(lambda: a.ready() == "leader", 30, "a leads", a.log)
        b = env.launch(*ELECTION, lease_ns, tag="b", config=SPREAD)
        wait_for(lambda: b.ready() is not None, 30, "b ready", b.log)
        holder = lease(env)["spec"]["holderIdentity"]
        assert given_identity(holder) == "twin" and holder != "twin"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # and it stays so
            assert (a.ready(), b.ready()) == ("leader", "follower"), b.log.read_text()[-3000:]
            time.sleep(0.5)
        c = builders.container
        for i in range(10):
            kube.create("pods", gpu_pod(f"p{i}", namespace, name, c(gpumem=4000)))
        wait_for(lambda: len(bound(kube, namespace)) >= 8, 60, "8 pods bound", a.log)
        time.sleep(3)  # time for a second leader, were there one, to bind the other 2
        assert len(bound(kube, namespace)) == 8, bound(kube, namespace)
        check_not_overcommitted(kube, namespace, nodes)
        assert lease(env)["spec"]["holderIdentity"] == holder
        twin_renews(env, holder, a, b, nodes)


def twin_renews(env: FaultEnv, holder: str, leader: SchedulerProcess,
                follower: SchedulerProcess, nodes: list[str]) -> None:
    """A renewal under the leader's holder identity that the leader did not send."""
    while True:
        current = lease(env)
        assert current["spec"]["holderIdentity"] == holder
        current["spec"]["renewTime"] = dt.datetime.now(dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            env.kube.replace("leases", current)
            break
        except ConflictError:  # the leader renewed in between: again
            continue
    assert leader.proc.wait(15) == 1, leader.log.read_text()[-3000:]
    assert "under this replica's identity" in leader.log.read_text()
    # The follower takes over once the Lease lapses (4 s), after the in-doubt wait (2 s).
    wait_for(lambda: follower.ready() == "leader", 30, "the follower takes over",
             follower.log)
    assert lease(env)["spec"]["holderIdentity"] not in ("", holder)
    time.sleep(3)
    assert len(bound(env.kube, env.namespace)) == 8
    check_not_overcommitted(env.kube, env.namespace, nodes)
