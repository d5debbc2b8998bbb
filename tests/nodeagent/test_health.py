from __future__ import annotations

import pytest

from vgpu_nodeagent.devices.health import HealthTracker
from vgpu_nodeagent.devices.xid import APPLICATION_XIDS, is_device_fault


@pytest.mark.parametrize(("xid", "fault"), [
    (13, False), (31, False), (43, False), (45, False), (68, False), (109, False),
    (48, True), (62, True), (63, True), (64, True), (74, True), (79, True), (94, True),
    (95, True), (0, True),
])
def test_xid_classification(xid: int, fault: bool) -> None:
    assert is_device_fault(xid) is fault


def test_application_xids_are_the_documented_six() -> None:
    assert frozenset({13, 31, 43, 45, 68, 109}) == APPLICATION_XIDS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_unhealthy_at_once_then_healthy_after_quiet_period() -> None:
    clock = Clock()
    health = HealthTracker(quiet_seconds=60, clock=clock)
    assert health.unhealthy() == frozenset()
    health.fault(["GPU-a"])
    assert health.unhealthy() == {"GPU-a"}
    clock.now += 59.9
    assert health.unhealthy() == {"GPU-a"}
    clock.now += 0.1
    assert health.unhealthy() == frozenset()


def test_a_fault_during_the_quiet_period_starts_it_again() -> None:
    clock = Clock()
    health = HealthTracker(quiet_seconds=10, clock=clock)
    health.fault(["GPU-a", "GPU-b"])
    clock.now += 8
    health.fault(["GPU-a"])
    clock.now += 5
    assert health.unhealthy() == {"GPU-a"}
    clock.now += 5
    assert health.unhealthy() == frozenset()


def test_zero_quiet_period_recovers_at_the_next_look() -> None:
    health = HealthTracker(quiet_seconds=0, clock=Clock())
    health.fault(["GPU-a"])
    assert health.unhealthy() == frozenset()
