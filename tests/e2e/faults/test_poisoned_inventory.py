"""One Node's bad ``vgpu.io/node-gpus`` quarantines that node, not the cluster (issue 36,
case 3): a number past any GPU's (``cores: 2147483648``, memory past 2**63) once raised
an overflow in the scheduling loop, and the process, and every restarted replica, died."""

from __future__ import annotations

import json
import time

import vgpu.annotations as ann
from tests.e2e.faults.conftest import FaultEnv
from tests.e2e.scheduler_kube_support import TEST_LABEL, bound, events_of, gpu_pod, wait_for
from tests.support.fakeagent import FakeAgents
from vgpu import builders


def poisoned(name: str, namespace: str, **bad: int) -> dict[str, object]:
    node = builders.node(name, builders.devices(name, 2), heartbeat=time.time(),
                         labels={TEST_LABEL: namespace})
    inventory = json.loads(node["metadata"]["annotations"][ann.NODE_GPUS])
    inventory["devices"][0].update(bad)
    node["metadata"]["annotations"][ann.NODE_GPUS] = json.dumps(inventory)
    return node


def test_a_poisoned_inventory_quarantines_its_node(env: FaultEnv) -> None:
    kube, namespace = env.kube, env.namespace
    bad = [f"bad-cores-{namespace[-6:]}", f"bad-memory-{namespace[-6:]}"]
    kube.create("nodes", poisoned(bad[0], namespace, cores=2**31))
    kube.create("nodes", poisoned(bad[1], namespace, memory_mib=2**63))
    try:
        good = env.nodes(1)
        with FakeAgents(kube, namespace):
            sched = env.launch()
            sched.wait_ready()
            for i in range(3):
                kube.create("pods", gpu_pod(f"p{i}", namespace, env.scheduler_name,
                                            builders.container(gpumem=1000)))
            wait_for(lambda: len(bound(kube, namespace)) == 3, 30, "pods placed", sched.log)
        assert set(bound(kube, namespace).values()) == {good}
        assert sched.proc.poll() is None, sched.log.read_text()[-4000:]
        assert sched.get("/healthz")[0] == 200
        for name in bad:
            warnings = [e for e in events_of(kube, "default", name)
                        if e["type"] == "Warning" and e["reason"] == "InvalidInventory"]
            assert warnings, (name, sched.log.read_text()[-3000:])
        assert sched.metric("vgpu_scheduler_node_inventory_invalid") == 2
    finally:
        for name in bad:
            kube.delete("nodes", name)
