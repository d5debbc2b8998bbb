"""The shortcuts taken when reading the bound pods of a cold start (issue 40) read what the
full reading does: host ports, and a single container's requests remembered per config."""

from __future__ import annotations

from typing import Any

import pytest

from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu_scheduler.framework import compute, podinfo
from vgpu_scheduler.framework.host_ports import HostPort, parse_host_ports


def _pod(*containers: Any, init: tuple[Any, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}


@pytest.mark.parametrize(("pod", "want"), [
    (_pod({"name": "a"}), ()),
    (_pod({"name": "a", "ports": []}), ()),
    (_pod({"name": "a", "ports": [{"containerPort": 80}]}), ()),
    (_pod({"name": "a", "ports": [{"containerPort": 80, "hostPort": 0}]}), ()),
    (_pod({"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]}),
     (HostPort("TCP", "0.0.0.0", 8080),)),
    # A sidecar binds; a plain init container has ended.
    (_pod({"name": "a"}, init=({"name": "s", "restartPolicy": "Always",
                                "ports": [{"hostPort": 9, "protocol": "UDP"}]},)),
     (HostPort("UDP", "0.0.0.0", 9),)),
    (_pod({"name": "a"}, init=({"name": "i", "ports": [{"hostPort": 9}]},)), ()),
    (_pod("not a container"), ()),
    ({"spec": {"containers": "nope"}}, ()),
])
def test_host_ports(pod: dict[str, Any], want: tuple[HostPort, ...]) -> None:
    assert parse_host_ports(pod) == want


@pytest.mark.parametrize("ports", [["80"], "80", [{"hostPort": "80"}], [{"hostPort": 70000}]])
def test_malformed_ports_still_raise(ports: Any) -> None:
    with pytest.raises(RequestError):
        parse_host_ports(_pod({"name": "a", "ports": ports}))


def _sized(cpu: Any, memory: str = "1Gi", name: str = "main", **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory, **extra}}}


@pytest.mark.parametrize("containers", [
    (_sized("2"),),
    (_sized("2", **{"example.com/dongle": "3"}),),
    (_sized(2),),
    ({"name": "main"},),
    (_sized("1"), _sized("3", name="side")),
])
def test_requests_as_computed(containers: tuple[Any, ...]) -> None:
    config = Config()
    for _ in range(2):  # the second read comes from the memo where there is one
        info = podinfo.parse(_pod(*containers), config)
        want = compute.pod_requests(_pod(*containers), config.owns_resource)
        assert (info.cpu_milli, info.memory, dict(info.resources)) == (
            want.cpu, want.memory, dict(want.other))
        assert info.error is None


def test_a_bad_quantity_is_reported_every_time() -> None:
    config = Config()
    for _ in range(2):
        info = podinfo.parse(_pod(_sized("two")), config)
        assert info.error is not None and "cpu" in info.error


def test_requests_are_remembered_per_config_and_follow_the_resources() -> None:
    config = Config()
    a = podinfo.parse(_pod(_sized("2")), config)
    b = podinfo.parse(_pod(_sized("3")), config)
    assert (a.cpu_milli, b.cpu_milli) == (2000, 3000)
    # The init container and the overhead add to it: not the single-container memo.
    with_init = podinfo.parse(_pod(_sized("2"), init=(_sized("5", name="init"),)), config)
    assert with_init.cpu_milli == 5000
    pod = _pod(_sized("2"))
    pod["spec"]["overhead"] = {"cpu": "500m"}
    assert podinfo.parse(pod, config).cpu_milli == 2500
