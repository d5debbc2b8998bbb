from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.ops.cluster_fixture import A0, A1, B0, NODES, NOW, PODS, gpu, node, pod
from vgpu import cli, config
from vgpu.cluster.memory import MemoryCluster
from vgpu_kubectl import inspect, inspect_cli, inspect_render


def report(nodes: list[dict[str, Any]] = NODES, pods: list[dict[str, Any]] = PODS,
           now: dt.datetime = NOW) -> inspect.Report:
    return inspect.build(nodes, pods, now=now, heartbeat_expiry_seconds=180,
                         scheduler_name="vgpu-scheduler")


TABLE = """\
NODE   GPU  MODEL                  MEMORY MiB (ALLOC/TOTAL)  MEM%  CORES   TASKS  ISOLATION       \
HEALTH
gpu-a  0    NVIDIA A100-SXM4-40GB  25120/40960               61%   60/100  3/10   mps (uid 1000)  \
healthy
       1    NVIDIA A100-SXM4-40GB  10000/40960               24%   30/100  1/10   mps (uid 1000)  \
healthy
gpu-b  0    Tesla T4               8000/15360                52%   0/100   1/10   unknown         \
unhealthy, node stale
TOTAL  3    2 nodes                43120/97280               44%   90/300  5/30                   \
2/3 healthy
Isolation per node (what holds each container to its slice):
  gpu-a: mps: memory held, compute held, a GPU is one fault domain, one uid per GPU (MPS)
  gpu-b: unknown: memory not held, compute not held, a GPU is one fault domain
Pending GPU pods: 1
WARNING pod default/garbled: vgpu.io/assignment.containers: expected an object, got null
WARNING node gpu-broken: vgpu.io/node-gpus: not valid JSON: Expecting property name enclosed \
in double quotes at position 1
WARNING pod default/ghost: container main is assigned GPU GPU-gone on node gpu-b, which no \
node inventory lists"""

DETAILS = """\
gpu-a  0    NVIDIA A100-SXM4-40GB  25120/40960               61%   60/100  3/10   mps (uid 1000)  \
healthy
    default/infer  container=main  memory=4096MiB  cores=10  phase=allocating
    default/infer  container=sidecar  memory=1024MiB  cores=0  phase=allocating
    ml/train  container=worker  memory=20000MiB  cores=50  phase=success
       1    NVIDIA A100-SXM4-40GB  10000/40960               24%   30/100  1/10   mps (uid 1000)  \
healthy
    ml/train  container=worker  memory=10000MiB  cores=30  phase=success
gpu-b  0    Tesla T4               8000/15360                52%   0/100   1/10   unknown         \
unhealthy, node stale
    default/t4-job  container=main  memory=8000MiB  cores=0  phase=success
TOTAL"""


def test_table_on_the_known_cluster() -> None:
    assert inspect_render.render_table(report()) == TABLE


def test_details_list_the_pods_under_their_gpu() -> None:
    assert DETAILS in inspect_render.render_table(report(), details=True)


def test_json_on_the_known_cluster() -> None:
    out = json.loads(inspect_render.render_json(report()))
    assert [n["name"] for n in out["nodes"]] == ["gpu-a", "gpu-b"]
    a0, a1 = out["nodes"][0]["gpus"]
    assert (a0["isolation"], out["nodes"][1]["gpus"][0]["isolation"]) == ("mps", "unknown")
    assert (a0["uuid"], a0["memoryAllocatedMiB"], a0["coresAllocated"], a0["tasks"]) == (
        A0, 25120, 60, 3)
    assert (a1["uuid"], a1["memoryAllocatedMiB"], a1["coresAllocated"], a1["tasks"]) == (
        A1, 10000, 30, 1)
    assert [(p["namespace"], p["name"], p["container"], p["memoryMiB"], p["bindPhase"])
            for p in a0["pods"]] == [("default", "infer", "main", 4096, "allocating"),
                                     ("default", "infer", "sidecar", 1024, "allocating"),
                                     ("ml", "train", "worker", 20000, "success")]
    b = out["nodes"][1]
    assert b["stale"] is True and b["heartbeat"] == "2024-05-01T11:00:00+00:00"
    assert b["gpus"][0]["uuid"] == B0 and b["gpus"][0]["healthy"] is False
    assert out["totals"] == {
        "nodes": 2, "gpus": 3, "healthyGpus": 2, "memoryCapacityMiB": 97280,
        "memoryAllocatedMiB": 43120, "cores": 300, "coresAllocated": 90, "tasks": 5,
        "slots": 30, "pendingPods": 1}
    assert [w["object"] for w in out["warnings"]] == [
        "pod default/garbled", "node gpu-broken", "pod default/ghost"]


@pytest.mark.parametrize(("phase", "counted"), [
    ("Running", True), ("Pending", True), ("Unknown", True), ("", True),
    ("Succeeded", False), ("Failed", False),
])
def test_finished_pods_hold_no_gpu(phase: str, counted: bool) -> None:
    r = report([node("n", [gpu("G", 0, "m", 1000)])],
               [pod("p", "n", {"c": [("G", 300, 20)]}, phase=phase)])
    usage = r.nodes[0].gpus[0].usage
    assert (usage.memory_mib, usage.cores, usage.tasks) == ((300, 20, 1) if counted else (0, 0, 0))


@pytest.mark.parametrize(("heartbeat", "stale"), [
    ("2024-05-01T11:57:01Z", False),    # 179 s old
    ("2024-05-01T11:56:59Z", True),     # 181 s old
    (None, True),                        # never written
    ("yesterday", True),                 # unreadable: warned about, treated as missing
])
def test_stale_heartbeat(heartbeat: str | None, stale: bool) -> None:
    n = node("n", [gpu("G", 0, "m", 1000)], heartbeat=heartbeat)
    r = report([n], [])
    assert r.nodes[0].stale is stale
    assert bool(r.warnings) is (heartbeat == "yesterday")


def test_oversubscribed_memory_is_measured_against_the_scaled_capacity() -> None:
    r = inspect.build([node("n", [gpu("G", 0, "m", 1000)])],
                      [pod("p", "n", {"c": [("G", 1500, 0)]})], now=NOW,
                      heartbeat_expiry_seconds=180, scheduler_name="vgpu-scheduler",
                      memory_scaling=2.0)
    assert r.nodes[0].gpus[0].capacity_mib == 2000 and r.totals.memory_mib == 2000
    assert inspect_render.render_table(r).splitlines()[1].split()[3:5] == ["1500/2000", "75%"]
    out = json.loads(inspect_render.render_json(r))["nodes"][0]["gpus"][0]
    assert (out["memoryMiB"], out["memoryCapacityMiB"]) == (1000, 2000)


def test_empty_cluster() -> None:
    r = report([], [])
    assert r.totals == inspect.Totals()
    assert inspect_render.render_table(r).splitlines()[1].startswith("TOTAL  0")


def test_the_command_reads_through_the_port(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    cluster = MemoryCluster()
    for n in NODES:
        cluster.create("nodes", n)
    for p in PODS:
        cluster.create("pods", p)
    got = inspect_cli.collect(cluster, config.from_mapping({}), NOW)
    assert got == report()

    from vgpu.kube import adapter
    seen: list[str | None] = []

    def fake_connect(kubeconfig: str | None, **_: Any) -> MemoryCluster:
        seen.append(kubeconfig)
        return cluster

    monkeypatch.setattr(adapter, "connect", fake_connect)
    assert cli.main(["inspect", "--kubeconfig", "/k", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert seen == ["/k"]
    # Real time: every heartbeat of the fixture is long stale, the allocations are the same.
    assert out["totals"]["memoryAllocatedMiB"] == 43120
    assert all(n["stale"] for n in out["nodes"])
    assert cli.main(["inspect", "-d"]) == 0
    assert "ml/train  container=worker" in capsys.readouterr().out


def test_unreachable_cluster_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inspect", "--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vgpu inspect: error:") and "Traceback" not in err


_text = st.one_of(st.text(max_size=30), st.just('{"version": 1}'),
                  st.builds(json.dumps, st.recursive(
                      st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                      lambda kids: st.lists(kids, max_size=3)
                      | st.dictionaries(st.sampled_from(["version", "node", "containers",
                                                          "devices", "uuid", "memory_mib"]),
                                        kids, max_size=4), max_leaves=10)))


@settings(max_examples=150, deadline=None)
@given(st.lists(_text, max_size=3), st.lists(_text, max_size=4))
def test_malformed_annotations_never_crash(node_texts: list[str], pod_texts: list[str]) -> None:
    nodes = [*NODES, *(node(f"x{i}", None, raw=t) for i, t in enumerate(node_texts))]
    pods = [*PODS, *(pod(f"y{i}", "gpu-a", None, raw=t) for i, t in enumerate(pod_texts))]
    r = report(nodes, pods)
    # The well-formed part of the cluster is reported as before, whatever the rest holds,
    # and each malformed annotation (none of these texts can be a valid one: the
    # strategy never writes every required key) is one warning.
    assert r.nodes == report().nodes
    assert len(r.warnings) == len(report().warnings) + len(node_texts) + len(pod_texts)
    inspect_render.render_table(r, details=True)
    json.loads(inspect_render.render_json(r))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5000), st.integers(0, 40),
                          st.sampled_from(["Running", "Pending", "Succeeded", "Failed"])),
                max_size=12))
def test_totals_are_the_sum_of_the_rows(placements: list[tuple[int, int, int, str]]) -> None:
    uuids = [A0, A1, "GPU-c"]
    nodes = [node("n", [gpu(u, i, "m", 16000) for i, u in enumerate(uuids)])]
    pods = [pod(f"p{i}", "n", {"c": [(uuids[g], m, k)]}, phase=ph)
            for i, (g, m, k, ph) in enumerate(placements)]
    r = report(nodes, pods)
    live = [(g, m, k) for g, m, k, ph in placements if ph not in ("Succeeded", "Failed")]
    assert r.totals.memory_allocated_mib == sum(m for _, m, _ in live)
    assert r.totals.cores_allocated == sum(k for _, _, k in live)
    assert r.totals.tasks == len(live)
    for row in r.nodes[0].gpus:
        mine = [(m, k) for g, m, k in live if uuids[g] == row.device.uuid]
        assert row.usage.tasks == len(mine) == len(row.pods)
        assert row.usage.memory_mib == sum(m for m, _ in mine)
