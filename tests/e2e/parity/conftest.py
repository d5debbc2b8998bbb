"""Both schedulers, started once for the parity tests: kube-scheduler v1.20 (built by
``tests/controlplane/build.sh kube-scheduler``) with its default profile, and
`vgpu scheduler` with its default profile and configuration."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.e2e.parity.support import KUBE, VGPU
from tests.e2e.scheduler_kube_support import SchedulerProcess
from vgpu.kube import adapter

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


@pytest.fixture(scope="package")
def schedulers(control_plane: ControlPlane,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    ours = SchedulerProcess(control_plane, tmp_path_factory.mktemp("parity"), VGPU)
    try:
        with KubeScheduler(control_plane, scheduler_name=KUBE):
            ours.wait_ready()
            yield
    finally:
        with contextlib.suppress(AssertionError):
            ours.stop()


@pytest.fixture
def priority(kube: adapter.KubeCluster) -> Iterator[Callable[[int], str]]:
    """``priority(value)``: a PriorityClass of that value (v1.20's Priority admission
    refuses a bare ``spec.priority``), deleted after the test."""
    made: list[str] = []

    def make(value: int) -> str:
        name = f"parity-{uuid.uuid4().hex[:10]}"
        kube.request_json("POST", CLASSES, "create priorityclass", body={
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value})
        made.append(name)
        return name

    yield make
    for name in made:
        kube.request_json("DELETE", f"{CLASSES}/{name}", "delete priorityclass")
