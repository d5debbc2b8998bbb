"""``--load`` and ``--seeds``: the stream offers what was asked, the intervals are
Student's, and the CLI runs policies × seeds in processes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.cli import main
from vgpu.errors import ConfigError
from vgpu_simulate import policies
from vgpu_simulate.churn import churn
from vgpu_simulate.churn_stats import interval, parse_seeds, t975
from vgpu_simulate.load import achieved, peak, stream
from vgpu_simulate.trace import TraceError, TraceNode, TracePod

NODES = [TraceNode(f"n{i}", 32000, 131072, 4, "T4") for i in range(4)]  # 16 GPUs


def pod(name: str, milli: int, born: int, gone: int | None, gpus: int = 1) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, milli, creation_time=born, deletion_time=gone)


#: Over a day: pods of 1, 2 and half a GPU, each for an hour or two.
DAY = [pod(f"p{i}", 1000 if i % 3 else 500, i * 900, i * 900 + 3600 * (1 + i % 2),
           gpus=1 + (i % 4 == 0)) for i in range(96)]


def offered(pods: list[TracePod], window: float) -> float:
    """The offered GPU demand's mean over the window, counted pod by pod."""
    total = 0.0
    for p in pods:
        born = p.creation_time or 0.0
        gone = min(p.deletion_time or math.inf, window)
        total += max(0.0, gone - born) * p.total_gpu_milli / 1000
    return total / window


@pytest.mark.parametrize("load", [0.5, 1.0, 1.2, 3.0])
def test_the_stream_offers_the_load_asked(load: float) -> None:
    pods, made = stream(DAY, 16, load=load, window=1800, seed=42)
    assert made.offered == pytest.approx(load, rel=1e-6)
    assert offered(pods, 1800) / 16 == pytest.approx(load, rel=1e-6)
    assert made.pods == len(pods) and all((p.creation_time or 0) < 1800 for p in pods)
    assert made.offered_peak >= made.offered
    assert peak(pods, 1800) / 16 == pytest.approx(made.offered_peak)
    # Durations are kept; only arrivals move.
    by_name = {p.name: p for p in DAY}
    for p in pods:
        first = by_name[p.name.rsplit(".l", 1)[0]]
        assert (p.deletion_time or 0) - (p.creation_time or 0) == pytest.approx(
            (first.deletion_time or 0) - (first.creation_time or 0))


def test_seeds_turn_the_laps_and_a_seed_repeats_itself() -> None:
    a, _ = stream(DAY, 16, load=2.0, window=7200, seed=42)
    b, _ = stream(DAY, 16, load=2.0, window=7200, seed=42)
    c, _ = stream(DAY, 16, load=2.0, window=7200, seed=43)
    assert [(p.name, p.creation_time) for p in a] == [(p.name, p.creation_time) for p in b]
    assert [(p.name, p.creation_time) for p in a] != [(p.name, p.creation_time) for p in c]


def test_bad_loads_are_refused() -> None:
    with pytest.raises(ConfigError, match="positive"):
        stream(DAY, 16, load=0, window=1800, seed=1)
    with pytest.raises(ConfigError, match="window"):
        stream(DAY, 16, load=1, window=math.nan, seed=1)
    with pytest.raises(TraceError, match="same time"):
        stream([pod("a", 1000, 5, 10), pod("b", 1000, 5, 20)], 16, load=1, window=60, seed=1)
    with pytest.raises(ConfigError, match="pods would be replayed"):
        stream(DAY, 16, load=1e7, window=1800, seed=1)


def test_achieved_load_is_the_mean_allocated_over_the_window() -> None:
    # 4 GPUs held for the first half, 8 for the rest: a mean of 6 over 16 GPUs.
    assert achieved([(0.0, 4.0, 0.0), (900.0, 8.0, 2.0)], 1800, 16) == pytest.approx(6 / 16)


def test_a_loaded_replay_reports_offered_and_achieved_load() -> None:
    result = churn(NODES, DAY, policies.get("fgd"), seed=42, load=1.2, window=1800)
    assert result.load is not None and result.load.offered == pytest.approx(1.2, rel=1e-6)
    assert result.achieved_load is not None and 0 < result.achieved_load <= 1.0
    assert result.waiting_gpu_seconds > 0  # 1.2 × the GPUs cannot all run at once
    doc = result.to_json()
    assert doc["load"]["target"] == 1.2 and "achieved_load" in doc


@pytest.mark.parametrize(("values", "mean", "half"), [
    ([5.0], 5.0, 0.0),
    ([1.0, 3.0], 2.0, 12.706),  # s = √2, /√2 = 1
    ([2.0, 2.0, 2.0], 2.0, 0.0),
    ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 5.5, 2.262 * math.sqrt(55 / 6 / 10)),
])
def test_interval_is_students(values: list[float], mean: float, half: float) -> None:
    found = interval(values)
    assert found.mean == pytest.approx(mean) and found.half == pytest.approx(half, rel=1e-4)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400))
def test_t_quantile_falls_towards_the_normal(df: int) -> None:
    assert 1.959964 < t975(df) <= 12.706
    assert t975(df + 1) < t975(df)


@pytest.mark.parametrize(("text", "seeds"), [
    ("42-51", list(range(42, 52))), ("42", [42]), ("42,45, 50-51", [42, 45, 50, 51]),
    ("3,1-3", [3, 1, 2]),
])
def test_seeds_parse(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a-b", "51-42", "1-100000", "4,,5"])
def test_bad_seeds_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--seeds"):
        parse_seeds(text)


@pytest.fixture(autouse=True)
def _keep_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    import vgpu.cli

    monkeypatch.setattr(vgpu.cli.logs, "setup", lambda *a, **k: None)


def test_cli_load_seeds_in_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CI smoke run of ``--load --seeds``: two policies × three seeds in two processes,
    the summary's means and intervals from the per-seed values, the plot's bands."""
    (tmp_path / "n.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"{n.name},{n.cpu_milli},{n.memory_mib},{n.gpus},{n.model}\n" for n in NODES))
    (tmp_path / "p.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n"
        + "".join(f"{p.name},{p.cpu_milli},{p.memory_mib},{p.num_gpu},{p.gpu_milli},,"
                  f"{p.creation_time},{p.deletion_time}\n" for p in DAY))
    out, svg = tmp_path / "r.json", tmp_path / "c.svg"
    assert main(["simulate", "--churn", "--nodes", str(tmp_path / "n.csv"), "--pods",
                 str(tmp_path / "p.csv"), "--policy", "fgd", "--policy", "waiting-aware",
                 "--load", "1.2", "--window", "1800", "--seeds", "42-44", "--jobs", "2",
                 "--json", str(out), "--plot", str(svg)]) == 0
    doc = json.loads(out.read_text())
    assert doc["load"] == 1.2 and len(doc["runs"]) == 6
    for entry in doc["mean"]:
        assert entry["seeds"] == [42, 43, 44]
        for key in ("waiting_gpu_seconds", "wait_mean", "wait_p95", "never_placed",
                    "allocated_gpu_hours", "fragmented_idle_gpu_seconds", "offered_load",
                    "achieved_load"):
            found = interval(entry["per_seed"][key])
            assert entry[key] == pytest.approx(found.mean, abs=0.01)
            assert entry[f"{key}_ci95"] == pytest.approx(found.half, abs=0.01)
        runs = [r for r in doc["runs"] if r["policy"] == entry["policy"]]
        assert entry["per_seed"]["waiting_gpu_seconds"] == [r["waiting_gpu_seconds"]
                                                            for r in runs]
    text = capsys.readouterr().out
    assert "±" in text and "achieved load" in text
    assert svg.read_text().count("<polygon") == 4  # a band per policy in each panel
    for bad in (["--load", "1"], ["--churn", "--window", "60"], ["--churn", "--load", "-1"],
                ["--churn", "--jobs", "0"], ["--seeds", "9-1"]):
        assert main(["simulate", "--nodes", str(tmp_path / "n.csv"), "--pods",
                     str(tmp_path / "p.csv"), "--no-plot", *bad]) == 2
