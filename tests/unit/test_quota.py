"""A pod's charge for the derived names as Kubernetes' quota admission counts it."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.quota_charge import CORES, MEMORY, NAMES, VGPUS, Charge, pod_charge


def c(name: str, mib: int | str | None = None, *, vgpus: int = 1, cores: int = 0,
      sidecar: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name}
    if mib is not None:
        values = {VGPUS: str(vgpus), MEMORY: str(mib), CORES: str(cores)}
        container["resources"] = {"limits": dict(values), "requests": dict(values)}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def pod(*apps: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {"spec": {"containers": list(apps), "initContainers": list(init)}}


CASES = [
    ("nothing derived", pod(c("a")), Charge()),
    ("one container", pod(c("a", 100, vgpus=2, cores=30)), Charge(2, 100, 30)),
    ("app containers add up", pod(c("a", 100), c("b", 50, cores=5)), Charge(2, 150, 5)),
    ("a plain init container counts by the max rule, per resource",
     pod(c("a", 100), init=(c("i", 500, vgpus=1),)), Charge(1, 500, 0)),
    ("two plain init containers: the larger, not the sum",
     pod(c("a", 10), init=(c("i", 300), c("j", 200))), Charge(1, 300, 0)),
    ("a sidecar adds to the app containers",
     pod(c("a", 100), init=(c("s", 50, sidecar=True),)), Charge(2, 150, 0)),
    ("a plain init container after a sidecar runs beside it",
     pod(c("a", 10), init=(c("s", 50, sidecar=True), c("i", 400))), Charge(2, 450, 0)),
    ("a plain init container before a sidecar does not",
     pod(c("a", 10), init=(c("i", 400), c("s", 50, sidecar=True))), Charge(2, 400, 0)),
    ("requests are what count; limits alone do not",
     {"spec": {"containers": [{"name": "a", "resources": {"limits": {MEMORY: "5"}}}]}},
     Charge()),
    ("a value that is no whole number counts 0",
     pod({"name": "a", "resources": {"requests": {MEMORY: "1.5", VGPUS: "x", CORES: "3"}}}),
     Charge(0, 0, 3)),
    ("malformed containers are skipped",
     {"spec": {"containers": [None, {"name": "a", "resources": "no"}, c("b", 7)]}},
     Charge(1, 7, 0)),
    ("no spec", {}, Charge()),
]


@pytest.mark.parametrize(("pod_", "want"), [(p, w) for _, p, w in CASES],
                         ids=[n for n, _, _ in CASES])
def test_pod_charge(pod_: dict[str, Any], want: Charge) -> None:
    assert pod_charge(pod_) == want


def test_resources_are_whole_numbers_under_the_three_names() -> None:
    assert Charge(2, 4096, 60).resources() == {VGPUS: "2", MEMORY: "4096", CORES: "60"}
    assert set(Charge().by_name()) == set(NAMES)
    # Owned by vgpu, quota-able as extended resources: outside kubernetes.io and nvidia.com.
    for name in NAMES:
        assert name.startswith("vgpu.io/")
