"""The node's last check (issue 36): what the agent served on each GPU, and the grants it
refuses because the GPU has no room for them, by the scheduler's own fit arithmetic."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from vgpu import served
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, PHASE_ALLOCATING, PHASE_SUCCESS
from vgpu.codecs import Assignment, GrantedDevice, encode_assignment
from vgpu.config import Config
from vgpu.devices import Device, FitReason, Usage
from vgpu_nodeagent.allocation.inflight_pod import decode
from vgpu_nodeagent.allocation.ledger import Ledger

GPU = Device(uuid="GPU-0", index=0, model="T4", memory_mib=16000, cores=100, split=4,
             numa=0, healthy=True)
DEVICES = {GPU.uuid: GPU}
T = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def g(mib: int, cores: int = 0, uuid: str = "GPU-0") -> tuple[GrantedDevice, ...]:
    return (GrantedDevice(uuid, mib, cores),)


def obj(name: str, assignment: Assignment, *, phase: str = PHASE_ALLOCATING,
        record: bool = False, pod_phase: str = "Running",
        scheduler: str = "vgpu-scheduler", asks: bool = True) -> dict[str, Any]:
    """A pod bound to n1 whose containers ask (``asks``) for the GPUs it was granted."""
    conditions = [served.condition(assignment, T)] if record else []
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": {ASSIGNMENT: encode_assignment(assignment),
                                         BIND_PHASE: phase}},
            "spec": {"nodeName": "n1", "schedulerName": scheduler,
                     "containers": [
                         {"name": n, "resources": {"limits": {"nvidia.com/gpu": str(len(gs))}}}
                         if asks else {"name": n}
                         for n, gs in assignment.containers.items()]},
            "status": {"phase": pod_phase, "conditions": conditions}}


def ledger() -> Ledger:
    return Ledger(Config())


@pytest.mark.parametrize(("held", "asked", "reason"), [
    ([], g(16000), None),
    ([g(10000, 50)], g(6000, 50), None),
    ([g(10000, 50)], g(6001), FitReason.MEMORY),
    ([g(1000, 60)], g(1000, 50), FitReason.CORES),
    ([g(1000, 100)], g(1000, 0), FitReason.FULLY_CLAIMED),
    ([g(1000, 10)], g(1000, 100), FitReason.EXCLUSIVE),
    ([g(100)] * 4, g(100), FitReason.NO_SLOTS),
    ([g(15000, uuid="GPU-9")], g(16000), None),   # not this GPU
])
def test_admit(held: list[tuple[GrantedDevice, ...]], asked: tuple[GrantedDevice, ...],
               reason: FitReason | None) -> None:
    book = ledger()
    for i, grant in enumerate(held):
        assert book.admit(f"held-{i}", {"main": grant}, DEVICES) is None
    over = book.admit("new", {"main": asked}, DEVICES)
    assert (over.reason if over else None) is reason
    if over is not None:
        assert "GPU-0" in over.message and "16000 MiB" in over.message
        assert book.served().get("GPU-0", Usage()).tasks == sum(
            1 for h in held if h[0].uuid == "GPU-0")  # nothing recorded for "new"


def test_two_containers_of_one_pod_on_one_gpu_are_counted_together() -> None:
    book = ledger()
    over = book.admit("p", {"a": g(9000), "b": g(9000)}, DEVICES)
    # What the other pods were served: nothing; the pod's own two slices do not fit.
    assert over is not None and over.used == Usage() and over.reason is FitReason.MEMORY
    assert book.served() == {}


def test_an_init_containers_slice_is_counted_by_the_largest_not_added() -> None:
    # The kubelet hands an init container's devices on to the app containers, and it has
    # ended when they run: the GPU holds the larger of the two slices (vgpu.init_reuse).
    book = ledger()
    assert book.admit("p", {"init": g(9000)}, DEVICES, frozenset({"init"})) is None
    assert book.admit("p", {"main": g(9000)}, DEVICES, frozenset({"init"})) is None
    assert book.served() == {"GPU-0": Usage(9000, 0, 1)}
    # Another pod sees the larger slice held, not the sum.
    assert book.admit("q", {"main": g(7000)}, DEVICES) is None
    assert book.admit("r", {"main": g(1000)}, DEVICES) is not None


def test_a_pods_next_container_is_checked_against_its_first() -> None:
    book = ledger()
    assert book.admit("p", {"init": g(9000)}, DEVICES) is None
    assert book.admit("p", {"main": g(7000)}, DEVICES) is None
    assert book.served() == {"GPU-0": Usage(16000, 0, 2)}
    assert book.admit("p", {"main": g(7000)}, DEVICES) is None  # the same container again


def test_the_watch_tells_what_was_served_and_what_is_gone() -> None:
    book = ledger()
    a = Assignment("n1", {"main": g(10000)})
    book.on_pod(None, obj("a", a, phase=PHASE_SUCCESS, record=True))
    # An agent without the served record left bind-phase success only.
    book.on_pod(None, obj("b", Assignment("n1", {"main": g(3000)}), phase=PHASE_SUCCESS))
    # Bound, not served: holds nothing here yet; another scheduler's pod: nothing ever.
    book.on_pod(None, obj("c", Assignment("n1", {"main": g(3000)})))
    book.on_pod(None, obj("d", a, phase=PHASE_SUCCESS, scheduler="other"))
    assert book.served() == {"GPU-0": Usage(13000, 0, 2)}
    assert book.admit("e", {"main": g(4000)}, DEVICES) is not None
    book.on_pod(obj("a", a), obj("a", a, phase=PHASE_SUCCESS, record=True,
                                 pod_phase="Succeeded"))
    book.on_pod(obj("b", a), None)
    assert book.served() == {}
    assert book.admit("e", {"main": g(4000)}, DEVICES) is None


def test_bind_phase_success_counts_only_for_the_gpus_a_pod_asks_for() -> None:
    """Annotations are the owner's: a pod that asks for no GPU, or for fewer than its
    assignment names, holds nothing without the agent's served record."""
    book = ledger()
    whole = Assignment("n1", {"main": g(16000)})
    book.on_pod(None, obj("forged", whole, phase=PHASE_SUCCESS, asks=False))
    two = Assignment("n1", {"main": g(8000) + g(8000)})
    pod = obj("more", two, phase=PHASE_SUCCESS)
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    book.on_pod(None, pod)
    broken = obj("broken", whole, phase=PHASE_SUCCESS)
    broken["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "x"
    book.on_pod(None, broken)
    assert book.served() == {}
    book.on_pod(None, obj("served", whole, phase=PHASE_SUCCESS, record=True, asks=False))
    assert book.served() == {"GPU-0": Usage(16000, 0, 1)}


def test_an_edited_annotation_does_not_change_what_was_served() -> None:
    book = ledger()
    true = Assignment("n1", {"main": g(10000)})
    pod = obj("a", true, phase=PHASE_SUCCESS, record=True)
    pod["metadata"]["annotations"][ASSIGNMENT] = encode_assignment(
        Assignment("n1", {"main": g(1000)}))
    book.on_pod(None, pod)
    assert book.served() == {"GPU-0": Usage(10000, 0, 1)}


def test_a_previous_runs_progress_counts() -> None:
    book = ledger()
    a = Assignment("n1", {"init": g(6000), "main": g(6000)})
    book.restore([decode(obj("a", a), "n1", done={"init"})])
    assert book.served() == {"GPU-0": Usage(6000, 0, 1)}


def test_an_update_to_a_successor_of_the_name_frees_what_the_first_was_served() -> None:
    """A pod deleted and created again under its name while the watch was away (issue 50):
    the successor, not served yet, holds nothing; the first's slices are free."""
    book = ledger()
    a = Assignment("n1", {"main": g(10000)})
    first = obj("a", a, phase=PHASE_SUCCESS, record=True)
    book.on_pod(None, first)
    successor = obj("a", a)
    successor["metadata"]["uid"] = "uid-a-2"
    book.on_pod(first, successor)
    assert book.served() == {}
    assert book.admit("e", {"main": g(16000)}, DEVICES) is None
