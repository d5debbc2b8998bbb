from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from vgpu.annotations import BIND_PHASE, BIND_TIME
from vgpu_nodeagent.allocation.inflight import InFlight, is_allocating

RESOURCE = "nvidia.com/gpu"
SCHEDULER = "vgpu-scheduler"


def p(name: str, phase: str | None = "allocating", bound: str = "2026-01-01T00:00:00Z",
      status: str = "Pending", rv: str = "1", *, scheduler: str = SCHEDULER,
      gpus: int = 1) -> dict[str, Any]:
    annotations = {BIND_TIME: bound}
    if phase is not None:
        annotations[BIND_PHASE] = phase
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": rv, "annotations": annotations},
            "spec": {"nodeName": "node-1", "schedulerName": scheduler,
                     "containers": [{"name": "main",
                                     "resources": {"limits": {RESOURCE: str(gpus)}}}]},
            "status": {"phase": status}}


def index() -> InFlight:
    return InFlight(resource=RESOURCE, schedulers={SCHEDULER})


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
    assert [x["metadata"]["name"] for x in inflight.current()] == ["first", "second"]
    inflight.on_pod(p("second"), p("second", phase="success", rv="2"))
    assert [x["metadata"]["name"] for x in inflight.current()] == ["first"]
    inflight.on_pod(p("first"), None)
    assert inflight.current() == []


def test_finished_pods_are_not_offered_until_the_watch_shows_their_phase() -> None:
    inflight = index()
    pod = p("a")
    inflight.on_pod(None, pod)
    inflight.mark_done(pod, ["c1"])
    assert inflight.done(pod) == {"c1"}
    inflight.finish(pod)
    assert inflight.current() == []
    inflight.on_pod(pod, p("a", rv="2"))  # another change, still allocating
    assert inflight.current() == []
    inflight.on_pod(pod, p("a", phase="success", rv="3"))
    assert inflight.done(pod) == frozenset()


def test_wait_returns_when_a_pod_arrives() -> None:
    inflight = index()
    timer = threading.Timer(0.05, lambda: inflight.on_pod(None, p("a")))
    timer.start()
    start = time.monotonic()
    assert [x["metadata"]["name"] for x in inflight.wait(5.0).pods] == ["a"]
    assert time.monotonic() - start < 5.0
    timer.join()
    assert index().wait(0.01).pods == []


def with_assignment(obj: dict[str, Any], text: str, rv: str) -> dict[str, Any]:
    obj["metadata"]["annotations"]["vgpu.io/assignment"] = text
    obj["metadata"]["resourceVersion"] = rv
    return obj


def test_a_pod_keeps_the_assignment_its_binding_carried() -> None:
    """An edit of vgpu.io/assignment between the binding and Allocate changes nothing the
    agent serves (issue 24); a removal neither."""
    inflight = index()
    first = with_assignment(p("a"), "bound", "1")
    inflight.on_pod(None, first)
    inflight.on_pod(first, with_assignment(p("a"), "edited", "2"))
    (served,) = inflight.current()
    assert served["metadata"]["annotations"]["vgpu.io/assignment"] == "bound"
    removed = p("a", rv="3")
    inflight.on_pod(first, removed)
    (served,) = inflight.current()
    assert served["metadata"]["annotations"]["vgpu.io/assignment"] == "bound"
    # A new pod of the same name is a new binding.
    replaced = with_assignment(p("a", rv="4"), "new", "4")
    replaced["metadata"]["uid"] = "uid-a-2"
    inflight.on_pod(removed, replaced)
    (served,) = inflight.current()
    assert served["metadata"]["annotations"]["vgpu.io/assignment"] == "new"


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
    assert admission.intruder is None and [x["metadata"]["name"] for x in admission.pods] == ["b"]


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
