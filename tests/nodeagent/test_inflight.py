from __future__ import annotations

import threading
import time
from typing import Any

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
