"""The replay over time (``--churn``): waits known by hand, and pods placed only while they
exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.cli import main
from vgpu.errors import ConfigError
from vgpu_simulate import policies
from vgpu_simulate.churn import churn, sample_nodes
from vgpu_simulate.churn_ledger import consolidated
from vgpu_simulate.churn_plot import binned
from vgpu_simulate.trace import TraceError, TraceNode, TracePod

ONE_GPU = [TraceNode("n0", 16000, 65536, 1, "T4")]


def pod(name: str, milli: int, born: int, gone: int | None, gpus: int = 1) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, milli, creation_time=born, deletion_time=gone)


#: On one GPU: a holds it until 100; b and c (halves) wait for it and share it from 100;
#: d (whole) comes and goes while they hold it; e (whole) waits until c (150) and b (200)
#: are gone; f asks for two GPUs, which no node has.
HAND = [pod("a", 1000, 0, 100), pod("b", 500, 10, 200), pod("c", 500, 20, 150),
        pod("d", 1000, 120, 130), pod("e", 1000, 140, 400), pod("f", 1000, 5, 50, gpus=2)]


@pytest.mark.parametrize("name", ["fgd", "fragmentation-aware-online", "waiting-aware",
                                  "lowest-task-count"])
def test_waits_known_by_hand(name: str) -> None:
    result = churn(ONE_GPU, HAND, policies.get(name), seed=1)
    waits = {w.pod: (w.arrived, w.placed, w.left) for w in result.waits}
    assert waits == {"a": (0, 0, 100), "b": (10, 100, 200), "c": (20, 100, 150),
                     "d": (120, None, 130), "e": (140, 200, 400), "f": (5, None, 50)}
    assert (result.unfit, result.never_placed, result.placed) == (1, 1, 4)
    # 0.5 x 90 + 0.5 x 80 + 1 x 10 + 1 x 60; f (unfit) counts in no wait figure.
    assert result.waiting_gpu_seconds == 155
    assert (result.wait_mean, result.wait_max) == (48, 90)
    assert result.fragmented_idle_gpu_seconds == 0  # one GPU cannot be split
    assert result.span == 400


def test_idle_gpu_split_over_two_gpus_is_fragmented_while_a_whole_gpu_pod_waits() -> None:
    nodes = [TraceNode("n0", 16000, 65536, 2, "T4")]
    trace = [pod("h1", 500, 0, 10), pod("h2", 500, 1, 20), pod("w", 1000, 2, 30)]
    spread = churn(nodes, trace, policies.get("spread"), seed=1)
    # The halves on two GPUs: w waits from 2 to 10 beside one idle GPU cut in two halves.
    assert {w.pod: w.placed for w in spread.waits} == {"h1": 0, "h2": 1, "w": 10}
    assert spread.fragmented_idle_gpu_seconds == 8
    packed = churn(nodes, trace, policies.get("binpack"), seed=1)
    assert {w.pod: w.placed for w in packed.waits}["w"] == 2
    assert packed.fragmented_idle_gpu_seconds == 0


def test_pods_still_running_leave_when_the_trace_ends() -> None:
    result = churn(ONE_GPU, [pod("a", 1000, 0, None), pod("b", 1000, 5, 50)],
                   policies.get("fgd"), seed=1)
    assert {w.pod: (w.placed, w.left) for w in result.waits} == {"a": (0, 50),
                                                                 "b": (None, 50)}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([250, 500, 1000]), st.integers(1, 2),
                          st.integers(0, 40), st.integers(0, 30)), min_size=1, max_size=10),
       st.sampled_from(["fgd", "waiting-aware", "spread"]))
def test_no_pod_is_placed_before_it_arrives_or_after_it_leaves(
        shapes: list[tuple[int, int, int, int]], name: str) -> None:
    nodes = [TraceNode("n0", 8000, 65536, 2, "T4"), TraceNode("n1", 4000, 65536, 1, "T4")]
    trace = [pod(f"p{i}", milli, born, born + life, gpus)
             for i, (milli, gpus, born, life) in enumerate(shapes)]
    result = churn(nodes, trace, policies.get(name), seed=3)
    assert len(result.waits) == len(trace)
    for w in result.waits:
        assert w.placed is None or w.arrived <= w.placed <= w.left
    assert 0 <= result.fragmented_idle_gpu_seconds <= 3 * result.span


def test_capacity_keeps_a_seeded_share_of_the_nodes() -> None:
    nodes = [TraceNode(f"n{i}", 1000, 1024, 1, "T4") for i in range(100)]
    kept = sample_nodes(nodes, 0.6, seed=7)
    assert len(kept) == 60 and kept == sample_nodes(nodes, 0.6, seed=7)
    assert kept != sample_nodes(nodes, 0.6, seed=8)
    with pytest.raises(ConfigError):
        sample_nodes(nodes, 1.5, seed=1)


def test_consolidated_and_binned() -> None:
    assert consolidated([500, 700, 0]) == [1000, 200]
    assert consolidated([1000, 1000]) == [1000, 1000]
    # Two GPUs allocated for the first half, none after: 50 % of 4 GPUs, then 0.
    points = binned([(0.0, 2.0, 1.0), (50.0, 0.0, 0.0)], 100.0, 4, bins=2)
    assert [(a, p) for _, a, p in points] == [(50.0, 1.0), (0.0, 0.0)]


def test_a_pod_list_without_times_is_refused() -> None:
    with pytest.raises(TraceError, match="creation_time"):
        churn(ONE_GPU, [TracePod("x", 1000, 0, 1, 500)], policies.get("fgd"), seed=1)


@pytest.fixture(autouse=True)
def _keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    import vgpu.cli

    monkeypatch.setattr(vgpu.cli.logs, "setup", lambda *a, **k: None)


def test_cli_churn_writes_json_table_and_plot(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "n.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,16000,65536,1,T4\n")
    (tmp_path / "p.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n"
        + "".join(f"{p.name},{p.cpu_milli},{p.memory_mib},{p.num_gpu},{p.gpu_milli},,"
                  f"{p.creation_time},{p.deletion_time}\n" for p in HAND))
    out, svg = tmp_path / "r.json", tmp_path / "c.svg"
    assert main(["simulate", "--churn", "--nodes", str(tmp_path / "n.csv"), "--pods",
                 str(tmp_path / "p.csv"), "--policy", "fgd", "--json", str(out),
                 "--plot", str(svg)]) == 0
    doc = json.loads(out.read_text())
    assert doc["waiting_gpu_seconds"] == 155 and doc["never_placed"] == 1
    assert doc["timeline"] and svg.read_text().startswith("<svg")
    assert "waiting GPU-s" in capsys.readouterr().out
    assert main(["simulate", "--capacity", "0.5", "--nodes", str(tmp_path / "n.csv")]) == 2
    assert main(["simulate", "--churn", "--tenants", "2", "--nodes",
                 str(tmp_path / "n.csv")]) == 2
    assert main(["simulate", "--churn", "--capacity", "0", "--nodes", str(tmp_path / "n.csv"),
                 "--pods", str(tmp_path / "p.csv"), "--no-plot"]) == 2
