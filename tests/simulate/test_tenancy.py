"""Tenants and fault domains in a replay (vgpu_simulate.tenancy): the draws, the checks,
and that a replay without isolated pods is the replay without tenancy."""

from __future__ import annotations

import pytest

from vgpu import fault_domains
from vgpu.cluster.memory import MemoryCluster
from vgpu.codecs import assignment_of
from vgpu.errors import ConfigError
from vgpu_simulate import policies
from vgpu_simulate.replay import replay
from vgpu_simulate.tenancy import Tenancy
from vgpu_simulate.trace import TraceNode, TracePod

NODES = [TraceNode(f"n{i}", 64000, 262144, 2, "T4") for i in range(3)]
PODS = [TracePod(f"p{i}", 1000, 1024, 1, m) for i, m in enumerate(
    [500, 250, 250, 500, 300, 200, 500, 250, 750, 250, 500, 500])]


@pytest.mark.parametrize(("tenancy", "message"), [
    ({"tenants": 0}, "--tenants 0: must be at least 1"),
    ({"isolated": 1.5}, "--fault-domain-isolated 1.5: must be 0 to 1"),
    ({"isolated": -0.1}, "--fault-domain-isolated -0.1"),
    ({"mode": "mig"}, "--isolation 'mig': one of"),
])
def test_bad_settings_are_config_errors(tenancy: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        Tenancy(**tenancy)  # type: ignore[arg-type]


def test_the_draws_follow_the_seed_and_the_share() -> None:
    pods = tuple(TracePod(f"p{i}", 1000, 0, 1, 500) for i in range(2000))
    t = Tenancy(5, 0.2, "mps")
    first = t.assign(pods, 42)
    assert first == t.assign(pods, 42) and first != t.assign(pods, 43)
    namespaces = {ns for ns, _ in first.values()}
    assert namespaces == {f"tenant-{i}" for i in range(5)}
    isolated = sum(keeps for _, keeps in first.values())
    assert 300 < isolated < 500  # 20 % of 2000, give or take
    assert Tenancy().assign(pods, 42)["p0"] == ("default", False)
    assert Tenancy.annotations(True) == {fault_domains.ANNOTATION: fault_domains.NAMESPACE}
    assert Tenancy.annotations(False) == {}


def test_no_isolated_pod_gives_the_replay_without_tenancy() -> None:
    policy = policies.get(policies.DEFAULT)
    plain = replay(NODES, PODS, policy, seed=3, inflate=0)
    spread = replay(NODES, PODS, policy, seed=3, inflate=0, tenancy=Tenancy(4, 0.0, "mps"))
    assert plain.samples == spread.samples and plain.placed == spread.placed
    assert plain.isolated_pods is None and "isolated_pods" not in plain.to_json()
    assert spread.isolated_pods == 0


def test_isolated_pods_on_mps_never_share_a_gpu_with_another_namespace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Every pod isolated, four tenants, six MPS GPUs: each GPU holds one namespace.
    seen: list[MemoryCluster] = []
    original = MemoryCluster.__init__

    def keep(self: MemoryCluster, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(self)

    monkeypatch.setattr(MemoryCluster, "__init__", keep)
    result = replay(NODES, PODS, policies.get(policies.DEFAULT), seed=3, inflate=0,
                    tenancy=Tenancy(4, 1.0, "mps"))
    assert result.isolated_pods == len(PODS) and result.placed > 4
    by_gpu: dict[str, set[str]] = {}
    for pod in seen[-1].list("pods").items:
        assignment = assignment_of(pod)
        if assignment is not None and pod["spec"].get("nodeName"):
            for uuid in assignment.gpu_ids:
                by_gpu.setdefault(uuid, set()).add(pod["metadata"]["namespace"])
    assert by_gpu and all(len(namespaces) == 1 for namespaces in by_gpu.values()), by_gpu


def test_the_uids_follow_the_seed_and_the_count() -> None:
    pods = tuple(TracePod(f"p{i}", 1000, 0, 1, 500) for i in range(300))
    three = Tenancy(users=3)
    assert three.uids(pods, 42) == three.uids(pods, 42) != three.uids(pods, 43)
    assert set(three.uids(pods, 42).values()) == {1000, 1001, 1002}
    assert set(Tenancy().uids(pods, 42).values()) == {1000}
    assert set(Tenancy(users=0).uids(pods, 42).values()) == {None}
    with pytest.raises(ConfigError, match="--users -1: must be 0 or more"):
        Tenancy(users=-1)


def _replayed(monkeypatch: pytest.MonkeyPatch, tenancy: Tenancy) -> tuple[int, dict[str, set[str]]]:
    """The pods placed, and per GPU the uids (``?<pod>`` for none) of the pods on it."""
    seen: list[MemoryCluster] = []
    original = MemoryCluster.__init__

    def keep(self: MemoryCluster, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(self)

    monkeypatch.setattr(MemoryCluster, "__init__", keep)
    result = replay(NODES, PODS, policies.get(policies.DEFAULT), seed=3, inflate=0,
                    tenancy=tenancy)
    by_gpu: dict[str, set[str]] = {}
    for pod in seen[-1].list("pods").items:
        assignment = assignment_of(pod)
        if assignment is not None and pod["spec"].get("nodeName"):
            uid = pod["spec"].get("securityContext", {}).get("runAsUser")
            for uuid in assignment.gpu_ids:
                by_gpu.setdefault(uuid, set()).add(
                    str(uid) if uid is not None else f"?{pod['metadata']['name']}")
    return result.placed, by_gpu


def test_on_mps_each_gpu_serves_one_uid_and_pods_without_one_go_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve pods, six MPS GPUs: with one uid they share GPUs; with three, each GPU serves
    one; with none stated, each pod has a GPU to itself and some find none."""
    one, gpus_one = _replayed(monkeypatch, Tenancy(mode="mps"))
    three, gpus_three = _replayed(monkeypatch, Tenancy(mode="mps", users=3))
    alone, gpus_alone = _replayed(monkeypatch, Tenancy(mode="mps", users=0))
    assert all(len(uids) == 1 for uids in gpus_one.values())
    assert all(len(uids) == 1 for uids in gpus_three.values())
    assert all(len(uids) == 1 for uids in gpus_alone.values())
    assert alone <= 6 < one and three <= one
