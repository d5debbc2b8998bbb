"""The race harness (tests/scheduler/race_machine.py) under hypothesis.

``VGPUDEV_RACES=ci`` (the default) runs a fixed set of interleavings that fits CI's budget;
``VGPUDEV_RACES=long`` runs many more, longer and random, by hand::

    VGPUDEV_RACES=long python -m pytest -q -p no:cacheprovider tests/scheduler/test_races.py

``VGPUDEV_RACE_EXAMPLES=<n>`` sets how many runs either profile makes (to bound a long run
by time). ``VGPUDEV_RACE_STATS=<file>`` appends one JSON line with how many runs, steps and
distinct interleavings were explored.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.scheduler.race_machine import RaceMachine

_PROFILES = {
    "ci": settings(max_examples=250, stateful_step_count=40, deadline=None,
                   derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow]),
    "long": settings(max_examples=3000, stateful_step_count=120, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow]),
}
PROFILE = os.environ.get("VGPUDEV_RACES", "ci")


@pytest.fixture(scope="module", autouse=True)
def _stats() -> Iterator[None]:
    yield
    path = os.environ.get("VGPUDEV_RACE_STATS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"profile": PROFILE, "runs": RaceMachine.runs,
                                  "steps": RaceMachine.steps,
                                  "interleavings": len(RaceMachine.traces)}) + "\n")


TestRaces = RaceMachine.TestCase
TestRaces.settings = _PROFILES[PROFILE]
if os.environ.get("VGPUDEV_RACE_EXAMPLES"):
    TestRaces.settings = settings(TestRaces.settings,
                                  max_examples=int(os.environ["VGPUDEV_RACE_EXAMPLES"]))
