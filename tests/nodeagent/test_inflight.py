from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.support.pods import slices
from vgpu.annotations import BIND_PHASE, BIND_TIME
from vgpu.codecs import Assignment, encode_assignment
from vgpu_nodeagent.allocation.errors import AllocateError, Code, Refused, Unservable
from vgpu_nodeagent.allocation.inflight import InFlight
from vgpu_nodeagent.allocation.inflight_pod import Claim, is_allocating
from vgpu_nodeagent.allocation.progress import ProgressFile

RESOURCE = "nvidia.com/gpu"
SCHEDULER = "vgpu-scheduler"


def p(name: str, phase: str | None = "allocating", bound: str = "2026-01-01T00:00:00Z",
      status: str = "Pending", rv: str = "1", *, scheduler: str = SCHEDULER,
      gpus: int = 1, assignment: str | None = None) -> dict[str, Any]:
    annotations = {BIND_TIME: bound}
    if phase is not None:
        annotations[BIND_PHASE] = phase
    if assignment is not None:
        annotations["vgpu.io/assignment"] = assignment
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": rv, "annotations": annotations},
            "spec": {"nodeName": "node-1", "schedulerName": scheduler,
                     "containers": [{"name": "main",
                                     "resources": {"limits": {RESOURCE: str(gpus)}}}]},
            "status": {"phase": status}}


def index() -> InFlight:
    return InFlight(node="node-1", resource=RESOURCE, schedulers={SCHEDULER})


def test_is_allocating() -> None:
    assert is_allocating(p("a"))
    assert not is_allocating(p("a", phase="success"))
    assert not is_allocating(p("a", phase=None))
    assert not is_allocating(p("a", status="Failed"))


def test_index_follows_events_in_the_order_the_bindings_arrived() -> None:
    inflight = index()
    # The kubelet admits in its watch's order, not by the scheduler's bind-time.
    inflight.on_pod(None, p("first", bound="2026-01-01T00:00:09Z"))
    inflight.on_pod(None, p("second", bound="2026-01-01T00:00:01Z"))
    inflight.on_pod(None, p("other", phase="success"))
    inflight.on_pod(p("first"), p("first", rv="2"))  # an update keeps its place
    assert [x.pod["metadata"]["name"] for x in inflight.current()] == ["first", "second"]
    inflight.on_pod(p("second"), p("second", phase="success", rv="2"))
    assert [x.pod["metadata"]["name"] for x in inflight.current()] == ["first"]
    inflight.on_pod(p("first"), None)
    assert inflight.current() == []


def test_finished_pods_are_not_offered_until_the_watch_shows_their_phase() -> None:
    inflight = index()
    pod = p("a")
    inflight.on_pod(None, pod)
    (held,) = inflight.current()
    assert inflight.served(Claim(held, ("c1",))).done == {"c1"}
    inflight.finish(held)
    assert inflight.current() == []
    inflight.on_pod(pod, p("a", rv="2"))  # another change, still allocating
    assert inflight.current() == []
    inflight.on_pod(pod, p("a", phase="success", rv="3"))
    inflight.on_pod(None, p("a", rv="4"))  # what it remembered went with the phase
    assert inflight.current()[0].done == frozenset()


def test_wait_returns_when_a_pod_arrives() -> None:
    inflight = index()
    timer = threading.Timer(0.05, lambda: inflight.on_pod(None, p("a")))
    timer.start()
    start = time.monotonic()
    assert [x.pod["metadata"]["name"] for x in inflight.wait(5.0).pods] == ["a"]
    assert time.monotonic() - start < 5.0
    timer.join()
    assert index().wait(0.01).pods == []


def with_assignment(obj: dict[str, Any], assignment: Assignment, rv: str) -> dict[str, Any]:
    obj["metadata"]["annotations"]["vgpu.io/assignment"] = encode_assignment(assignment)
    obj["metadata"]["resourceVersion"] = rv
    return obj


BOUND = Assignment("node-1", {"main": slices(("GPU-a", 100, 0))})
EDITED = Assignment("node-1", {"main": slices(("GPU-b", 40000, 100))})
NEW = Assignment("node-1", {"main": slices(("GPU-c", 100, 0))})


def test_a_pod_keeps_the_assignment_its_binding_carried() -> None:
    """An edit of vgpu.io/assignment between the binding and Allocate changes nothing the
    agent serves (issue 24); a removal neither."""
    inflight = index()
    first = with_assignment(p("a"), BOUND, "1")
    inflight.on_pod(None, first)
    inflight.on_pod(first, with_assignment(p("a"), EDITED, "2"))
    (served,) = inflight.current()
    assert served.assignment == BOUND
    removed = p("a", rv="3")
    inflight.on_pod(first, removed)
    (served,) = inflight.current()
    assert served.assignment == BOUND
    # A new pod of the same name is a new binding.
    replaced = with_assignment(p("a", rv="4"), NEW, "4")
    replaced["metadata"]["uid"] = "uid-a-2"
    inflight.on_pod(removed, replaced)
    (served,) = inflight.current()
    assert served.assignment == NEW


def intruder(name: str, **kw: Any) -> dict[str, Any]:
    return p(name, phase=None, scheduler="other", **kw)


def test_only_pods_of_a_vgpu_scheduler_are_in_allocation() -> None:
    inflight = index()
    inflight.on_pod(None, p("forged", scheduler="other"))
    assert inflight.current() == []
    admission = inflight.wait(0)
    assert admission.pods == [] and admission.intruder is not None
    assert admission.intruder["metadata"]["name"] == "forged"


def test_an_intruder_is_named_only_when_it_comes_first() -> None:
    inflight = index()
    inflight.on_pod(None, p("a"))
    inflight.on_pod(None, intruder("x"))
    assert inflight.wait(0).intruder is None  # a comes first: this Allocate is a's
    inflight.on_pod(p("a"), p("a", phase="success", rv="2"))
    admission = inflight.wait(0)
    assert admission.pods == [] and admission.intruder["metadata"]["name"] == "x"
    inflight.on_pod(None, p("b"))
    assert inflight.wait(0).intruder["metadata"]["name"] == "x"  # x came before b
    inflight.refuse(admission.intruder)
    admission = inflight.wait(0)
    assert admission.intruder is None
    assert [x.pod["metadata"]["name"] for x in admission.pods] == ["b"]


@pytest.mark.parametrize(("what", "pod"), [
    ("asks for no device", intruder("x", gpus=0)),
    ("admitted by the kubelet", intruder("x", status="Running")),
    ("ended", intruder("x", status="Failed")),
])
def test_what_is_not_a_suspect(what: str, pod: dict[str, Any]) -> None:
    inflight = index()
    inflight.on_pod(None, pod)
    assert inflight.wait(0).intruder is None


def test_a_suspect_the_kubelet_starts_stops_being_one() -> None:
    inflight = index()
    inflight.on_pod(None, intruder("x"))
    started = intruder("x", rv="2")
    started["status"]["startTime"] = "2026-01-01T00:00:00Z"
    inflight.on_pod(intruder("x"), started)
    assert inflight.wait(0).intruder is None


def test_wait_returns_when_an_intruder_arrives() -> None:
    inflight = index()
    timer = threading.Timer(0.05, lambda: inflight.on_pod(None, intruder("x")))
    timer.start()
    admission = inflight.wait(5.0)
    timer.join()
    assert admission.intruder is not None and admission.pods == []


# -- the claim: which pod and containers an Allocate is for ---------------------------------

GPU_A, GPU_B = "GPU-a", "GPU-b"


def placed(name: str, gpu: str, *, node: str = "node-1") -> dict[str, Any]:
    return with_assignment(p(name), Assignment(node, {"main": slices((gpu, 100, 0))}), "1")


def test_a_claim_takes_the_pod_assigned_the_gpus_else_the_first_by_count() -> None:
    inflight = index()
    inflight.on_pod(None, placed("a", GPU_A))
    inflight.on_pod(None, placed("b", GPU_B))
    claim = inflight.claim([[f"{GPU_B}-0"]], {GPU_A, GPU_B}, 0)
    assert (claim.pod.key, claim.containers) == ("ns/b", ("main",))
    claim = inflight.claim([["GPU-c-0"]], {GPU_A, GPU_B, "GPU-c"}, 0)
    assert (claim.pod.key, claim.containers) == ("ns/a", ("main",))


def test_serving_every_container_stops_offering_the_pod() -> None:
    inflight = index()
    inflight.on_pod(None, placed("a", GPU_A))
    served = inflight.served(inflight.claim([[f"{GPU_A}-0"]], {GPU_A}, 0))
    assert served.done == {"main"} and served.complete
    assert inflight.current() == []


def test_nothing_in_allocation_is_a_failed_precondition() -> None:
    with pytest.raises(AllocateError) as raised:
        index().claim([[f"{GPU_A}-0"]], {GPU_A}, 0)
    assert raised.value.code is Code.FAILED_PRECONDITION
    assert "no pod on node node-1 is in vgpu.io/bind-phase=allocating" in str(raised.value)


def test_an_intruders_own_claim_is_refused_once() -> None:
    inflight = index()
    inflight.on_pod(None, intruder("x"))
    with pytest.raises(Refused) as raised:
        inflight.claim([[f"{GPU_A}-0"]], {GPU_A}, 0)
    assert raised.value.code is Code.PERMISSION_DENIED
    assert "pod ns/x: it asks for nvidia.com/gpu but no vgpu scheduler placed it" in str(
        raised.value)
    assert inflight.wait(0).intruder is None


@pytest.mark.parametrize(("obj", "reason"), [
    (p("a"), "it has no vgpu.io/assignment annotation"),
    (placed("a", GPU_A, node="node-2"), "its assignment is for node 'node-2', not this node"),
    (p("a", assignment="{not json"), "vgpu.io/assignment: not valid JSON"),
])
def test_a_pod_that_cannot_be_served_fails_and_is_no_longer_offered(
        obj: dict[str, Any], reason: str) -> None:
    inflight = index()
    inflight.on_pod(None, obj)
    with pytest.raises(Unservable) as raised:
        inflight.claim([[f"{GPU_A}-0"]], {GPU_A}, 0)
    assert raised.value.code is Code.INVALID_ARGUMENT and reason in raised.value.reason
    assert inflight.current() == []


def test_a_pod_a_previous_run_served_entirely_is_handed_back_once(tmp_path: Any) -> None:
    progress = ProgressFile(str(tmp_path / "allocations.json"))
    progress.save({"uid-a": {"main"}, "uid-b": {"other"}})
    inflight = InFlight(progress, node="node-1", resource=RESOURCE, schedulers={SCHEDULER})
    first = placed("a", GPU_A)
    served = inflight.on_pod(None, first)
    assert served is not None and served.done == {"main"} and served.complete
    assert inflight.on_pod(first, placed("a", GPU_A)) is None
    assert inflight.on_pod(None, placed("b", GPU_B)) is None  # not every container
    assert inflight.current()[0].done == {"other"}
