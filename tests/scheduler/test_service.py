"""The scheduler service on the in-memory cluster: probes, metrics over HTTP, leadership.

The same service runs against the real API server in tests/e2e/test_scheduler_kube*.py;
here the loops are bounded by short leases and timeouts so the whole file takes seconds.
"""

from __future__ import annotations

import copy
import datetime as dt
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import vgpu.annotations as ann
from vgpu import builders
from vgpu.cluster.leader import ElectionConfig
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu.errors import ConflictError, NotFoundError
from vgpu_scheduler.host.service import Options, Service


class Leases:
    """Leases with the API server's conditional-update rule, safe across threads."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self._lock = threading.Lock()

    def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        with self._lock:
            if self.lease is None:
                raise NotFoundError("lease not found")
            return copy.deepcopy(self.lease)

    def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self.lease is not None:
                raise ConflictError("exists")
            return self._store(lease)

    def replace_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            assert self.lease is not None
            if lease["metadata"].get("resourceVersion") != self.lease["metadata"][
                    "resourceVersion"]:
                raise ConflictError("stale")
            return self._store(lease)

    def _store(self, lease: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        self.lease = copy.deepcopy(lease)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    def holder(self) -> str:
        with self._lock:
            return str((self.lease or {}).get("spec", {}).get("holderIdentity") or "")


def wait_for(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
    return value


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Running:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.stop = threading.Event()
        self.result: list[int] = []
        self.thread = threading.Thread(target=lambda: self.result.append(service.run(self.stop)))
        self.thread.start()

    def end(self) -> int:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.result[0]


@pytest.fixture
def running() -> Iterator[Callable[[Service], Running]]:
    started: list[Running] = []

    def start(service: Service) -> Running:
        started.append(Running(service))
        return started[-1]

    yield start
    for r in started:
        r.stop.set()
        r.thread.join(10)


def cluster_with_nodes(count: int = 1) -> MemoryCluster:
    cluster = MemoryCluster()
    for i in range(count):
        cluster.create("nodes", builders.node(f"n{i}", builders.devices(f"n{i}", 2),
                                           heartbeat=time.time()))
    return cluster


def node_of(cluster: MemoryCluster, name: str) -> str | None:
    node: str | None = cluster.get("pods", name, "default")["spec"].get("nodeName")
    return node


def allocate_all(cluster: MemoryCluster) -> None:
    for pod in cluster.list("pods").items:
        meta = pod["metadata"]
        if (meta.get("annotations") or {}).get(ann.BIND_PHASE) == ann.PHASE_ALLOCATING:
            cluster.patch_annotations("pods", meta["name"], {ann.BIND_PHASE: ann.PHASE_SUCCESS},
                                      meta["namespace"])


def test_serves_probes_and_metrics_and_schedules(running: Callable[[Service], Running]) -> None:
    cluster = cluster_with_nodes()
    service = Service(Config(), cluster, options=Options(metrics_port=0, address="127.0.0.1",
                                                         watch_timeout=0.2))
    run = running(service)
    assert service.server is not None or wait_for(lambda: service.server)
    port = service.server.port  # type: ignore[union-attr]
    wait_for(lambda: get(port, "/readyz") == (200, "leader\n"))
    assert get(port, "/healthz") == (200, "ok\n")
    assert get(port, "/nope")[0] == 404
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    wait_for(lambda: node_of(cluster, "a"))
    wait_for(lambda: 'vgpu_scheduler_bindings_total{result="success"} 1.0' in get(
        port, "/metrics")[1])
    assert run.end() == 0
    # Stopped: the port is closed.
    with pytest.raises(OSError):
        get(port, "/healthz")


def test_not_ready_until_the_caches_synced() -> None:
    service = Service(Config(), cluster_with_nodes(), options=Options(watch_timeout=0.2))
    assert service.readyz() == (False, "caches not synced")
    service.scheduler.pump()
    assert service.readyz() == (True, "follower")  # not started: not leading


def election(who: str) -> ElectionConfig:
    return ElectionConfig("ns", "vgpu-scheduler", who, lease_duration=1.0, renew_deadline=0.6,
                          retry_period=0.05)


def test_one_replica_schedules_and_the_other_takes_over(
        running: Callable[[Service], Running]) -> None:
    cluster, leases = cluster_with_nodes(3), Leases()
    config = Config(scheduler=SchedulerConfig(bind_workers=2))
    services = {who: Service(config, cluster, leases=leases,
                             options=Options(election=election(who), watch_timeout=0.2))
                for who in ("a", "b")}
    runs = {who: running(s) for who, s in services.items()}
    first = wait_for(leases.holder)
    second = "b" if first == "a" else "a"
    wait_for(services[first].leading.is_set)
    for i in range(3):
        cluster.create("pods", builders.pod(f"p{i}", [builders.container(gpumem=1000)]))
    # (the node agents' part: each bound pod is allocated, which opens its node's gate)
    wait_for(lambda: (allocate_all(cluster), all(node_of(cluster, f"p{i}")
                                                 for i in range(3)))[1])
    assert not services[second].leading.is_set()
    # Ready as a follower once its own caches synced (on a loaded machine, a watch round
    # after the leader's bindings; seen in a cold full run).
    wait_for(lambda: services[second].readyz() == (True, "follower"))
    uid = cluster.get("pods", "p0", "default")["metadata"]["uid"]
    # A warm cache: the follower's own watch shows it the bound pod (its informer thread
    # may be a watch round behind the leader's binding on a loaded machine).
    wait_for(lambda: services[second].scheduler.cache.pod(uid) is not None)
    assert not services[second].scheduler.queue.counts()["in_flight"]

    allocate_all(cluster)
    assert runs[first].end() == 0  # a clean stop gives the Lease up...
    wait_for(services[second].leading.is_set, 2)  # ...so it is taken at once
    assert leases.holder() == second
    cluster.create("pods", builders.pod("later", [builders.container(gpumem=1000)]))
    wait_for(lambda: node_of(cluster, "later"))
    assert runs[second].end() == 0
    assert leases.holder() == ""


def test_a_leader_that_loses_the_lease_stops_with_an_error(
        running: Callable[[Service], Running]) -> None:
    leases = Leases()
    service = Service(Config(), cluster_with_nodes(), leases=leases,
                      options=Options(election=election("me"), watch_timeout=0.2))
    run = running(service)
    wait_for(service.leading.is_set)
    while True:  # another candidate takes the Lease
        lease = leases.get_lease("ns", "vgpu-scheduler")
        lease["spec"].update(holderIdentity="usurper", leaseDurationSeconds=60,
                             renewTime=dt.datetime.now(dt.UTC).isoformat())
        try:
            leases.replace_lease("ns", lease)
            break
        except ConflictError:
            continue
    run.thread.join(5)
    assert run.result == [1]
    assert not service.leading.is_set()
    assert leases.holder() == "usurper"


def test_a_leader_whose_lease_another_process_renews_under_its_identity_exits(
        running: Callable[[Service], Running]) -> None:
    """Issue 50, case 3: a twin (a process cloned with this one's identity) renews."""
    leases = Leases()
    service = Service(Config(), cluster_with_nodes(), leases=leases,
                      options=Options(election=election("me_n1"), watch_timeout=0.2))
    run = running(service)
    wait_for(service.leading.is_set)
    while True:
        lease = leases.get_lease("ns", "vgpu-scheduler")
        lease["spec"].update(renewTime=dt.datetime.now(dt.UTC).isoformat())
        try:
            leases.replace_lease("ns", lease)
            break
        except ConflictError:
            continue
    run.thread.join(5)
    assert run.result == [1]
    assert not service.leading.is_set()
    assert service.elector is not None and service.elector.twin is not None


def test_election_needs_a_lease_store() -> None:
    with pytest.raises(ValueError, match="lease store"):
        Service(Config(), MemoryCluster(), options=Options(election=election("x")))
