"""Fixtures for end-to-end tests against a real kube-apiserver.

The control plane starts once per session. If its binaries cannot be built or
it does not come up, every e2e test errors: a skipped e2e suite would pass CI
while proving nothing.

The ``test_scheduler_kube*`` modules' fixtures are here too: ``kube`` (an adapter on the
control plane), ``scheduler_name`` (one per test), ``nodes`` (GPU nodes labelled for the
test, deleted after it) and ``launch`` (`vgpu scheduler` processes, killed after it).
"""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from tests.controlplane.cluster import ControlPlane, ensure_binaries
from tests.e2e.harness import FullStack
from tests.e2e.harness_pods import namespace_for_test
from tests.e2e.scheduler_kube_support import TEST_LABEL, SchedulerProcess
from vgpu import builders
from vgpu.kube import adapter

E2E_DIR = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end tests on a real kube-apiserver (tests/e2e)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item, not only this folder's.
    for item in items:
        if E2E_DIR in item.path.resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    with ControlPlane() as cp:
        yield cp


@pytest.fixture(scope="module")
def kubectl_path() -> Path:
    return ensure_binaries().kubectl


@pytest.fixture
def api_client(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    with control_plane.api_client() as client:
        yield client


@pytest.fixture
def core_v1(api_client: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api_client)


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh namespace (with its ``default`` ServiceAccount) for one test.

    Never deleted: without a controller-manager a deleted namespace stays
    Terminating forever, and unique names already keep tests apart.
    """
    name = namespace_for_test(request.node.name)
    control_plane.ensure_namespace(name)
    return name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that used a running stack gets its components' logs in its report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, FullStack):
                report.sections.append(("vgpu components", value.logs()))


@pytest.fixture
def kube(control_plane: ControlPlane) -> adapter.KubeCluster:
    cluster = adapter.connect(str(control_plane.kubeconfig), qps=0, pool_size=32)
    assert cluster is not None
    return cluster


@pytest.fixture
def scheduler_name(namespace: str) -> str:
    return f"vgpu-{namespace}"[:63]


@pytest.fixture
def nodes(kube: adapter.KubeCluster, namespace: str) -> Iterator[Callable[..., str]]:
    """``nodes(gpus, **kw)`` creates a GPU node with a fresh heartbeat, labelled for this
    test; all are deleted at the end of the test."""
    created: list[str] = []

    def make(gpus: int = 2, *, heartbeat: float | None = None, **kw: Any) -> str:
        name = f"n-{uuid.uuid4().hex[:8]}"
        kube.create("nodes", builders.node(name, builders.devices(name, gpus, **kw),
                                        heartbeat=time.time() if heartbeat is None
                                        else heartbeat, labels={TEST_LABEL: namespace}))
        created.append(name)
        return name

    yield make
    for name in created:
        with contextlib.suppress(Exception):
            kube.delete("nodes", name)


@pytest.fixture
def launch(control_plane: ControlPlane, tmp_path: Path,
           scheduler_name: str) -> Iterator[Callable[..., SchedulerProcess]]:
    running: list[SchedulerProcess] = []

    def start(*args: str, config: dict[str, Any] | None = None,
              tag: str | None = None, kubeconfig: Path | None = None) -> SchedulerProcess:
        proc = SchedulerProcess(control_plane, tmp_path, scheduler_name, *args, config=config,
                                tag=tag or f"sched-{len(running)}", kubeconfig=kubeconfig)
        running.append(proc)
        return proc

    yield start
    for proc in running:
        with contextlib.suppress(AssertionError):
            proc.stop(signal.SIGKILL)
