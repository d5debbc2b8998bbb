"""The node agent's served record (issue 36, case 5): what every reader counts once it
exists, and how an edited annotation shows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from vgpu import served, usage
from vgpu.annotations import ASSIGNMENT
from vgpu.codecs import Assignment, GrantedDevice, encode_assignment
from vgpu.errors import CodecError

T = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SERVED = Assignment("n1", {"main": (GrantedDevice("GPU-0", 10000, 50),)})
EDITED = Assignment("n1", {"main": (GrantedDevice("GPU-0", 1000, 5),)})


def pod(annotation: Assignment | str | None, record: Assignment | None,
        *extra_conditions: dict[str, str]) -> dict[str, Any]:
    notes = {} if annotation is None else {
        ASSIGNMENT: annotation if isinstance(annotation, str) else encode_assignment(annotation)}
    conditions = [{"type": "Ready", "status": "True"}, *extra_conditions]
    if record is not None:
        conditions.append(served.condition(record, T))
    return {"metadata": {"name": "p", "annotations": notes},
            "spec": {"nodeName": "n1", "schedulerName": "vgpu-scheduler"},
            "status": {"phase": "Running", "conditions": conditions}}


@pytest.mark.parametrize(("obj", "held", "edited"), [
    (pod(SERVED, None), SERVED, None),                       # not served yet: the Binding's
    (pod(SERVED, SERVED), SERVED, None),
    (pod(EDITED, SERVED), SERVED, "differs from the assignment served"),
    (pod("{broken", SERVED), SERVED, "no longer reads"),
    (pod(None, SERVED), SERVED, "differs"),                  # the annotation removed
    (pod(SERVED, None, {"type": served.CONDITION, "status": "False", "message": "x"}),
     SERVED, None),                                          # a condition that is not True
])
def test_the_served_record_wins_over_the_annotation(obj: dict[str, Any], held: Assignment,
                                                    edited: str | None) -> None:
    assert served.held(obj) == held
    assert usage.claimed(obj, {"vgpu-scheduler"}) == held
    why = served.edited(obj)
    assert (why is None) is (edited is None)
    if edited is not None:
        assert why is not None and edited in why


def test_an_unreadable_record_is_an_error_not_silence() -> None:
    obj = pod(SERVED, None, {"type": served.CONDITION, "status": "True", "message": "{"})
    with pytest.raises(CodecError):
        served.held(obj)
    assert served.edited(obj) is None


def test_the_condition_carries_the_assignment_it_was_given() -> None:
    record = served.condition(SERVED, T)
    assert record["type"] == "vgpu.io/Allocated" and record["status"] == "True"
    assert record["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert served.served({"status": {"conditions": [record]}}) == SERVED
