"""Both schedulers, started once for the parity tests: kube-scheduler v1.20 (built by
``tests/controlplane/build.sh kube-scheduler``) with its default profile, and
`vgpu scheduler` with its default profile and configuration."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.e2e.parity.support import KUBE, VGPU
from tests.e2e.scheduler_kube_support import SchedulerProcess, priority_classes
from vgpu.kube import adapter


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
    """``priority(value)``: a PriorityClass of that value, deleted after the test."""
    yield from priority_classes(kube, "parity")
