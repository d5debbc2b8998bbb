from __future__ import annotations

import json
from pathlib import Path

import pytest

from vgpu.cli import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,16000,65536,2,T4\nn1,64000,262144,4,G2\n"
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        + "".join(f"p{i},2000,1024,1,{m},\n" for i, m in enumerate([500, 250, 1000, 750]))
        + "c,1000,1024,0,0,\n")


@pytest.fixture(autouse=True)
def _keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    # main() points structlog at sys.stderr, which is pytest's capture here and is closed
    # after the test; later tests that log would then fail.
    import vgpu.cli

    monkeypatch.setattr(vgpu.cli.logs, "setup", lambda *a, **k: None)


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    return tmp_path / "nodes.csv", tmp_path / "pods.csv"


def test_one_run_writes_the_run_object_a_table_and_a_plot(
        trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = trace
    out, svg = tmp_path / "r.json", tmp_path / "p.svg"
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd",
                 "--seed", "5", "--json", str(out), "--plot", str(svg)]) == 0
    doc = json.loads(out.read_text())
    assert {"policy", "seed", "pods", "placed", "failed", "unallocated_gpu_pct_at_100",
            "curve", "seconds"} <= set(doc)
    assert doc["policy"] == "fgd" and doc["seed"] == 5 and doc["placed"] + doc["failed"] == (
        doc["pods"])
    assert all(len(p) == 2 for p in doc["curve"])
    assert svg.read_text().startswith("<svg")
    printed = capsys.readouterr()
    assert "policy" in printed.out and "fgd" in printed.out and f"plot: {svg}" in printed.out
    assert "fgd seed 5:" in printed.err


def test_several_seeds_give_each_run_and_the_means(trace: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    nodes, pods = trace
    out = tmp_path / "r.json"
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "bestfit",
                 "--policy", "spread", "--seed", "1", "--seed", "2", "--json", str(out),
                 "--no-plot"]) == 0
    doc = json.loads(out.read_text())
    assert [(r["policy"], r["seed"]) for r in doc["runs"]] == [
        ("bestfit", 1), ("bestfit", 2), ("spread", 1), ("spread", 2)]
    assert [m["policy"] for m in doc["mean"]] == ["bestfit", "spread"]
    assert doc["mean"][0]["seeds"] == [1, 2]


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "nope"], "--policy 'nope': unknown; known: lowest-task-count"),
    (["--plot", "x.gif"], "use a .svg or .png file name"),
    (["--inflate", "-1"], "--inflate -1.0: must be 0"),
    (["--tenants", "0"], "--tenants 0: must be at least 1"),
    (["--fault-domain-isolated", "2"], "--fault-domain-isolated 2.0: must be 0 to 1"),
    (["--isolation", "mig"], "--isolation 'mig': one of none"),
])
def test_bad_arguments_are_one_line_errors(trace: tuple[Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str], args: list[str],
                                           message: str) -> None:
    nodes, pods = trace
    code = main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seed", "1",
                 "--policy", "bestfit", *args] if "--policy" not in args else
                ["simulate", "--nodes", str(nodes), "--pods", str(pods), *args])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_tenants_and_isolated_pods_are_counted(trace: tuple[Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = trace
    out = tmp_path / "r.json"
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "bestfit",
                 "--seed", "1", "--tenants", "3", "--fault-domain-isolated", "1",
                 "--isolation", "mps", "--json", str(out), "--no-plot"]) == 0
    doc = json.loads(out.read_text())
    assert doc["isolated_pods"] == doc["pods"] and doc["isolated_placed"] == doc["placed"]
    assert "tenants: 3 namespaces, 100% of the pods keep" in capsys.readouterr().out


def test_a_missing_trace_file_is_a_clear_error(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--pods", str(tmp_path / "none.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_list_policies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--list-policies"]) == 0
    out = capsys.readouterr().out
    assert "fragmentation-aware" in out and "fgd" in out and "bestfit" in out
