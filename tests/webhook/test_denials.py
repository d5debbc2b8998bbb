"""The webhook's denial Events (vgpu_webhook/denials.py): written only for what the API
server sends, never for a dry run, and at a bounded rate."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from vgpu.cluster.port import Obj
from vgpu_webhook.denials import DenialRecorder, from_the_api_server

SENT = {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
        "object": {"metadata": {"generateName": "job-"}}}


def edited(**fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(SENT)
    for key, value in fields.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(("request_", "sent"), [
    (SENT, True),
    (edited(dryRun=False), True),
    (edited(object={"metadata": {"name": "p", "namespace": "team-a"}}), True),
    (edited(dryRun=True), False),  # a dry run has no side effects, an Event is one
    (edited(uid="u-1"), False),
    (edited(uid="705AB4F5-6393-11E8-B7CC-42010A800002x"), False),
    (edited(userInfo={}), False),
    (edited(userInfo={"username": ""}), False),
    (edited(namespace=""), False),
    (edited(namespace=None), False),
    (edited(resource={"group": "", "version": "v1", "resource": "nodes"}), False),
    (edited(object={"metadata": {"name": "p", "namespace": "kube-system"}}), False),
])
def test_what_looks_sent_by_the_api_server(request_: dict[str, Any], sent: bool) -> None:
    assert from_the_api_server(request_) is sent


class Port:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def record_event(self, obj: Obj, event_type: str, reason: str, message: str,
                     component: str) -> None:
        self.events.append((obj["metadata"]["namespace"], obj["metadata"]["name"]))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_events_are_written_at_a_bounded_rate() -> None:
    port, clock = Port(), Clock()
    recorder = DenialRecorder(port, per_second=2, burst=5, clock=clock)  # type: ignore[arg-type]
    for i in range(100):  # a flood of distinct denials
        recorder.record("team-a", f"p-{i}", "denied")
    assert recorder.flush()
    assert len(port.events) == 5 and recorder.dropped == 95
    clock.now = 1.0  # two more a second
    for i in range(10):
        recorder.record("team-a", f"q-{i}", "denied")
    assert recorder.flush()
    assert len(port.events) == 7
