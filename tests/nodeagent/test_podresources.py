"""The kubelet's pod-resources view against the assignments: the pure comparison, the
client on a real gRPC socket, and the agent's check with its metrics and events."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.nodeagent.conftest import GPU0, GPU1, GPU2, NODE, small_config, wait_phase, wait_until
from tests.support.podresources import PodResourcesStandIn, response
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, PHASE_ALLOCATING, PHASE_SUCCESS
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu_nodeagent.kubelet.podresources import (
    KubeletDevices,
    KubeletView,
    Mismatch,
    PodResourcesClient,
    PodResourcesWatch,
    from_response,
    mismatches,
)

KNOWN = frozenset({GPU0, GPU1, GPU2})
SCHEDULERS = frozenset({"vgpu-scheduler"})


def bound(name: str, containers: dict[str, tuple[str, ...]], *, phase: str = "Running",
          bind: str = PHASE_SUCCESS, deleting: bool = False) -> Obj:
    """A pod on NODE whose assignment gives each container one slice per listed GPU."""
    cluster = MemoryCluster()
    obj = bind_assigned(cluster, pod(name, [container(c, len(g)) for c, g in containers.items()]),
                        NODE, {c: slices(*((u, 1000, 0) for u in g))
                               for c, g in containers.items()})
    obj["status"] = {"phase": phase}
    obj["metadata"]["annotations"][BIND_PHASE] = bind
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def with_init(obj: Obj, *names: str) -> Obj:
    """``obj`` with the named containers as its init containers."""
    spec = obj["spec"]
    spec["initContainers"] = [c for c in spec["containers"] if c["name"] in names]
    spec["containers"] = [c for c in spec["containers"] if c["name"] not in names]
    return obj


def kubelet(pod_name: str, **containers: tuple[str, ...]) -> list[KubeletDevices]:
    return [KubeletDevices("default", pod_name, c, ids) for c, ids in containers.items()]


@pytest.mark.parametrize(("pods", "view", "expected"), [
    pytest.param([bound("a", {"main": (GPU0,)})], kubelet("a", main=(f"{GPU0}-3",)), [],
                 id="one-gpu-agrees"),
    pytest.param([bound("a", {"main": (GPU0, GPU1)})],
                 kubelet("a", main=(f"{GPU1}-0", f"{GPU0}-9")), [], id="order-does-not-matter"),
    pytest.param([bound("a", {"main": (GPU0,)})], kubelet("a", main=(f"{GPU1}-0",)),
                 [Mismatch("default", "a", "main", (GPU1,), (GPU0,))], id="other-gpu"),
    pytest.param([bound("a", {"one": (GPU0,), "two": (GPU1, GPU2)})],
                 kubelet("a", one=(f"{GPU1}-0", f"{GPU2}-0"), two=(f"{GPU0}-0",)),
                 [Mismatch("default", "a", "one", (GPU1, GPU2), (GPU0,)),
                  Mismatch("default", "a", "two", (GPU0,), (GPU1, GPU2))],
                 id="two-containers-swapped"),
    pytest.param([bound("a", {"main": (GPU0,)})], kubelet("a", main=(), side=(f"{GPU0}-1",)),
                 [Mismatch("default", "a", "main", (), (GPU0,)),
                  Mismatch("default", "a", "side", (GPU0,), ())],
                 id="devices-on-an-unassigned-container"),
    pytest.param([bound("a", {"main": (GPU0,)})], kubelet("a", main=("other-7",)),
                 [Mismatch("default", "a", "main", ("other-7",), (GPU0,))],
                 id="an-id-that-is-not-ours-is-shown-as-is"),
    pytest.param([bound("a", {"main": (GPU0,)})], kubelet("b", main=(f"{GPU1}-0",)), [],
                 id="pod-not-listed-by-the-kubelet-yet"),
    pytest.param([], kubelet("b", main=(f"{GPU1}-0",)), [], id="pod-not-in-the-agent-watch"),
    pytest.param([bound("a", {"main": (GPU0,)}, phase="Succeeded")], kubelet("a", main=()),
                 [], id="ended-pod-holds-nothing-and-is-listed-with-nothing"),
    pytest.param([bound("a", {"main": (GPU0,)}, bind=PHASE_ALLOCATING)], kubelet("a", main=()),
                 [], id="listed-before-allocate"),
    pytest.param([bound("a", {"main": (GPU0,)}, deleting=True)], kubelet("a", main=()),
                 [], id="devices-freed-while-deleting"),
    # Init containers: 1.20's List has none, and the kubelet hands their device IDs on
    # to the first app container (the device manager's reuse).
    pytest.param([with_init(bound("a", {"init": (GPU1,), "main": (GPU0,)}), "init")],
                 kubelet("a", main=(f"{GPU0}-2",)), [], id="init-container-not-listed"),
    pytest.param([with_init(bound("a", {"init": (GPU1,), "main": (GPU0,)}), "init")],
                 kubelet("a", main=(f"{GPU1}-4",)), [], id="app-reuses-the-init-ids"),
    pytest.param([with_init(bound("a", {"init": (GPU1,), "main": (GPU0, GPU2)}), "init")],
                 kubelet("a", main=(f"{GPU1}-4", f"{GPU2}-0")), [],
                 id="app-reuses-some-init-ids"),
    pytest.param([with_init(bound("a", {"init": (GPU1,), "main": (GPU0,)}), "init")],
                 kubelet("a", main=(f"{GPU2}-4",)),
                 [Mismatch("default", "a", "main", (GPU2,), (GPU0,))],
                 id="a-gpu-neither-assigned-nor-reused"),
    pytest.param([with_init(bound("a", {"init": (GPU1,), "main": (GPU0,)}), "init")],
                 kubelet("a", init=(f"{GPU2}-0",), main=(f"{GPU0}-4",)),
                 [Mismatch("default", "a", "init", (GPU2,), (GPU1,))],
                 id="a-listed-init-container-is-checked"),
])
def test_mismatches(pods: list[Obj], view: list[KubeletDevices],
                    expected: list[Mismatch]) -> None:
    assert list(mismatches(view, pods, KNOWN, SCHEDULERS)) == expected


def test_unreadable_assignment_is_not_compared() -> None:
    obj = bound("a", {"main": (GPU0,)})
    obj["metadata"]["annotations"][ASSIGNMENT] = "{not json"
    assert mismatches(kubelet("a", main=(f"{GPU1}-0",)), [obj], KNOWN, SCHEDULERS) == ()


def test_mismatch_message_names_both_sides() -> None:
    text = Mismatch("ns", "p", "main", (GPU1,), ()).message
    assert text == f"container main: the kubelet gave it GPUs [{GPU1}] but it was assigned [none]"


def test_from_response_keeps_only_the_resource_and_every_container() -> None:
    answer = response({("ns", "p"): {"a": [f"{GPU1}-1", f"{GPU0}-2"], "b": []}})
    answer.pod_resources[0].containers[1].devices.add(resource_name="example.com/fpga",
                                                      device_ids=["fpga-0"])
    assert from_response(answer, "nvidia.com/gpu") == (
        KubeletDevices("ns", "p", "a", (f"{GPU0}-2", f"{GPU1}-1")),
        KubeletDevices("ns", "p", "b", ()))


def test_client_lists_over_the_socket(stand_in: PodResourcesStandIn) -> None:
    stand_in.set({("ns", "p"): {"main": [f"{GPU2}-4"]}})
    answer = PodResourcesClient(stand_in.socket_path).list()
    assert from_response(answer, "nvidia.com/gpu") == (
        KubeletDevices("ns", "p", "main", (f"{GPU2}-4",)),)


def test_watch_reports_a_mismatch_once_and_is_down_without_a_socket(
        stand_in: PodResourcesStandIn) -> None:
    pods = [bound("a", {"main": (GPU0,)})]
    reported: list[Mismatch] = []
    watch = PodResourcesWatch(PodResourcesClient(stand_in.socket_path), "nvidia.com/gpu",
                              lambda: KNOWN, lambda: pods, schedulers=SCHEDULERS,
                              report=reported.append)
    stand_in.set({("default", "a"): {"main": [f"{GPU1}-0"]}})
    first = watch.poll()
    watch.poll()
    assert first.up and len(first.mismatches) == 1
    assert reported == [Mismatch("default", "a", "main", (GPU1,), (GPU0,))]
    stand_in.set({("default", "a"): {"main": [f"{GPU0}-0"]}})
    assert watch.poll().mismatches == ()
    stand_in.stop()
    down = watch.poll()
    assert (down.up, down.devices) == (False, ())


def test_agent_checks_the_kubelet_view_into_metrics_and_events(
        make_env: Any, stand_in: PodResourcesStandIn) -> None:
    env = make_env(small_config(pod_resources_socket=stand_in.socket_path,
                                pod_resources_seconds=0.05))
    env.kubelet.wait_registration()
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod("m", [container("c", 1)]), NODE,
                  {"c": slices((GPU1, 2048, 25))})
    ids, _ = env.kubelet.admit_container(1, [])
    wait_phase(env, "m", "success")
    stand_in.set({("default", "m"): {"c": list(ids)}})
    assert env.agent.metrics_server is not None
    url = f"http://127.0.0.1:{env.agent.metrics_server.port}/metrics"

    def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    held = ("vgpu_container_kubelet_devices",
            (("container", "c"), ("namespace", "default"), ("pod", "m"), ("uuid", GPU1)))
    wait_until(lambda: samples().get(held) == 1, what="the kubelet's view in the metrics")
    assert samples()[("vgpu_nodeagent_pod_resources_up", ())] == 1
    assert samples()[("vgpu_nodeagent_pod_resources_mismatches", ())] == 0
    assert not env.cluster.events("m")

    stand_in.set({("default", "m"): {"c": [f"{GPU2}-0"]}})
    wait_until(lambda: samples()[("vgpu_nodeagent_pod_resources_mismatches", ())] == 1,
               what="the mismatch in the metrics")
    wait_until(lambda: bool(env.cluster.events("m")), what="the mismatch event")
    (event,) = env.cluster.events("m")
    assert (event.type, event.reason) == ("Warning", "GPUAssignmentMismatch")
    assert GPU2 in event.message and GPU1 in event.message


def test_watch_does_not_read_while_a_pod_is_admitted(stand_in: PodResourcesStandIn) -> None:
    quiet = False
    watch = PodResourcesWatch(PodResourcesClient(stand_in.socket_path), "nvidia.com/gpu",
                              lambda: KNOWN, lambda: [], schedulers=SCHEDULERS,
                              report=lambda m: None,
                              quiet=lambda: quiet)
    stand_in.set({("default", "a"): {"main": [f"{GPU0}-0"]}})
    assert watch.poll() == KubeletView() and stand_in.calls == 0
    assert watch.skipped == 1
    quiet = True
    assert watch.poll().devices == (KubeletDevices("default", "a", "main", (f"{GPU0}-0",)),)
    assert stand_in.calls == 1
