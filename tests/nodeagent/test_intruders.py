"""Intruders: pods that hold device IDs of our resource in the kubelet's view but no vgpu
assignment, named (and evicted when told) by the agent."""

from __future__ import annotations

import dataclasses
import urllib.request
from typing import Any

import pytest

from tests.nodeagent.conftest import GPU0, NODE, small_config, wait_until
from tests.nodeagent.test_podresources import KNOWN, SCHEDULERS, bound, kubelet
from tests.support.podresources import PodResourcesStandIn
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu.cluster.port import Obj
from vgpu_nodeagent.kubelet.podresources import Intruder, KubeletDevices, intruders, mismatches


def foreign(name: str, *, scheduler: str = "other", deleting: bool = False) -> Obj:
    """A pod on NODE that no vgpu scheduler placed, with a forged assignment on GPU0."""
    obj = bound(name, {"main": (GPU0,)})
    obj["spec"]["schedulerName"] = scheduler
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


@pytest.mark.parametrize(("pods", "view", "expected"), [
    pytest.param([foreign("x")], kubelet("x", main=(f"{GPU0}-1",)),
                 [Intruder("default", "x", (("main", (GPU0,)),))], id="forged-and-holding"),
    pytest.param([foreign("x")], kubelet("x", main=()), [], id="holding-nothing"),
    pytest.param([bound("a", {"main": (GPU0,)})], kubelet("a", main=(f"{GPU0}-1",)), [],
                 id="a-vgpu-pod"),
    pytest.param([foreign("x", deleting=True)], kubelet("x", main=(f"{GPU0}-1",)), [],
                 id="being-deleted"),
    pytest.param([], kubelet("x", main=(f"{GPU0}-1",)), [], id="not-in-the-watch"),
])
def test_intruders(pods: list[Obj], view: list[KubeletDevices],
                   expected: list[Intruder]) -> None:
    found = list(intruders(view, pods, KNOWN, SCHEDULERS))
    # Each names the very pod the watch showed, by its uid.
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    assert [i.uid for i in found] == [uids[i.pod] for i in found]
    assert [dataclasses.replace(i, uid="") for i in found] == expected
    # An intruder is no mismatch: it has no assignment of vgpu's to differ from.
    assert mismatches(view, pods, KNOWN, SCHEDULERS) == ()


def test_intruder_message_says_what_to_do() -> None:
    text = Intruder("ns", "x", (("main", (GPU0,)),)).message
    assert f"container main: GPUs [{GPU0}]" in text
    assert "not placed by a vgpu scheduler" in text and "delete it" in text


def agent_with_intruder(make_env: Any, stand_in: PodResourcesStandIn, *, evict: bool) -> Any:
    env = make_env(small_config(pod_resources_socket=stand_in.socket_path,
                                pod_resources_seconds=0.05, evict_intruders=evict))
    env.kubelet.wait_registration()
    obj = pod("x", [container("main", 1)])
    obj["spec"].update(nodeName=NODE, schedulerName="other")
    env.cluster.create("pods", obj)
    stand_in.set({("default", "x"): {"main": [f"{GPU0}-4"]}})
    return env


def test_the_agent_names_an_intruder(make_env: Any, stand_in: PodResourcesStandIn) -> None:
    env = agent_with_intruder(make_env, stand_in, evict=False)
    wait_until(lambda: bool(env.cluster.events("x")), what="the intruder's event")
    (event,) = env.cluster.events("x")
    assert event.reason == "GPUNotPlacedByVgpu" and event.type == "Warning"
    assert "not placed by a vgpu scheduler" in event.message
    url = f"http://127.0.0.1:{env.agent.metrics_server.port}/metrics"

    def gauge() -> str:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    wait_until(lambda: "vgpu_nodeagent_intruder_pods 1.0" in gauge(), what="the metric")
    assert env.cluster.list("pods").items  # named, not evicted


def test_the_agent_evicts_an_intruder_when_told(make_env: Any,
                                                stand_in: PodResourcesStandIn) -> None:
    env = agent_with_intruder(make_env, stand_in, evict=True)
    # The memory cluster's eviction deletes the pod at once.
    wait_until(lambda: not env.cluster.list("pods").items, what="the eviction")


def test_an_intruder_eviction_never_reaches_a_successor_of_its_name(
        make_env: Any, stand_in: PodResourcesStandIn) -> None:
    """Issue 36, case 4: the agent's view of the intruder predates a same-name replacement
    that was placed properly; the eviction carries the intruder's uid, so the API server
    refuses it instead of evicting the newcomer."""
    env = make_env(small_config(pod_resources_socket="", evict_intruders=True))
    obj = pod("x", [container("main", 1)])
    obj["spec"].update(nodeName=NODE, schedulerName="other")
    seen = env.cluster.create("pods", obj)
    stale = Intruder("default", "x", (("main", (GPU0,)),), seen["metadata"]["uid"])
    env.cluster.delete("pods", "x", "default")
    successor = bind_assigned(env.cluster, pod("x", [container("main", 1)]), NODE,
                              {"main": slices((GPU0, 1000, 0))})
    env.agent._report_intruder(stale)
    (left,) = env.cluster.list("pods").items
    assert left["metadata"]["uid"] == successor["metadata"]["uid"]
    assert not env.cluster.events("x")  # nor is the successor named an intruder
