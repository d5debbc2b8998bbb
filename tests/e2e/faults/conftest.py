"""Fixtures of the fault suite: a fault proxy in front of the session's kube-apiserver, and
a kubeconfig that sends a component through it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.pki import KeyPair, write_kubeconfig
from tests.e2e.faults.proxy import FaultProxy
from tests.e2e.scheduler_kube_support import SchedulerProcess
from vgpu.kube import adapter


def _ca(control_plane: ControlPlane) -> KeyPair:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate((control_plane.workdir / "ca.crt").read_bytes())
    key = serialization.load_pem_private_key(
        (control_plane.workdir / "ca.key").read_bytes(), password=None)
    return KeyPair(cert, key)  # type: ignore[arg-type]


def start_proxy(control_plane: ControlPlane, folder: Path) -> tuple[FaultProxy, Path]:
    """A running fault proxy in front of the control plane, and a kubeconfig (in
    ``folder``) that reaches the API server through it."""
    proxy = FaultProxy(control_plane.server.removeprefix("https://"), control_plane.workdir,
                       _ca(control_plane)).start()
    kubeconfig = folder / f"proxied-{proxy.port}.kubeconfig"
    write_kubeconfig(kubeconfig, proxy.server, control_plane.workdir)
    return proxy, kubeconfig


@pytest.fixture
def fault_proxy(control_plane: ControlPlane, tmp_path: Path,
                ) -> Iterator[Callable[[], tuple[FaultProxy, Path]]]:
    """``fault_proxy()`` starts a proxy and returns it with a kubeconfig through it."""
    started: list[FaultProxy] = []

    def start() -> tuple[FaultProxy, Path]:
        proxy, kubeconfig = start_proxy(control_plane, tmp_path)
        started.append(proxy)
        return proxy, kubeconfig

    yield start
    for proxy in started:
        proxy.stop()


@dataclass
class FaultEnv:
    """What a fault test works with: an adapter on the API server (no faults), the test's
    namespace and scheduler name, ``nodes(gpus, **kw)``, ``launch(*args, **kw)`` for
    `vgpu scheduler` processes and ``proxy()`` for a fault proxy with its kubeconfig."""

    kube: adapter.KubeCluster
    namespace: str
    scheduler_name: str
    nodes: Callable[..., str]
    launch: Callable[..., SchedulerProcess]
    proxy: Callable[[], tuple[FaultProxy, Path]]


@pytest.fixture
def env(request: pytest.FixtureRequest) -> FaultEnv:
    def get(name: str) -> Any:
        return request.getfixturevalue(name)

    return FaultEnv(get("kube"), get("namespace"), get("scheduler_name"), get("nodes"),
                    get("launch"), get("fault_proxy"))
