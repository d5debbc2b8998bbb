"""Every bench script runs, at a small size, and ends with its one JSON line (issue 40: a
bench nobody runs breaks unseen, as `bench/scheduling.py --nodes 5000` once did).

The figures are not checked here (timings belong to the benches, run by hand); that each
script runs to the end with its options, and prints what docs/benchmarks.md reads, is.
`bench/bind.py`, `bench/failover.py`, `bench/scheduler_perf.py` and `bench/write_bound.py`
need the control plane: their smoke runs are in tests/e2e/test_bench_smoke.py;
`bench/isolation.py` needs a GPU: tests/ops/test_bench_isolation*.py run it without one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.product import ROOT

#: Script and the options that make it small. Every bench script is here or named above.
SMOKE: dict[str, list[str]] = {
    "admission.py": ["--duration", "0.3", "--rate", "50"],
    "allocate.py": ["--rounds", "10", "--pods", "5", "--gpus", "2"],
    "inspect_report.py": ["--nodes", "20", "--rounds", "1"],
    "metrics.py": ["--gpus", "160", "--scrapes", "1"],
    "pod_path.py": [],
    "reconcile.py": ["--nodes", "50", "--placed", "300", "--rounds", "1", "--churn", "10"],
    "scheduling.py": ["--runs", "1", "--pods", "200", "--memory-target", "300"],
    "simulate.py": ["--policy", "binpack", "--sample", "0.05"],
    "simulate_diverge.py": ["--sample", "0.05", "--show", "1"],
    "simulate_fault_domains.py": ["--sample", "0.05", "--seeds", "42"],
    "simulate_mps_users.py": ["--sample", "0.05", "--seeds", "42", "--users", "3,0"],
    "simulate_topology.py": ["--sample", "0.05", "--variants", "multigpu30", "--shapes",
                             "mixed", "--policies", "binpack"],
    "soft_rules.py": ["--nodes", "60", "--runs", "1"],
}
ELSEWHERE = {"bind.py", "failover.py", "isolation.py", "scheduler_perf.py", "write_bound.py"}
#: The scale case of scheduling.py, and scripts that take a folder.
SCALE = ["--nodes", "200", "--placed", "400", "--pods", "100", "--runs", "1"]


def last_json(args: list[str], timeout: float = 240) -> dict[str, object]:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    last = done.stdout.strip().splitlines()[-1]
    value = json.loads(last)
    assert isinstance(value, dict) and value, last
    return value


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in (ROOT / "bench").glob("[a-z]*.py")}
    assert scripts == set(SMOKE) | ELSEWHERE | {"simulate_generate.py",
                                                "simulate_summary.py"}


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_the_bench_runs_small(script: str) -> None:
    last_json([f"bench/{script}", *SMOKE[script]])


def test_the_scale_bench_runs_small() -> None:
    # The path `from vgpu import annotations` broke on main (issue 40).
    out = last_json(["bench/scheduling.py", *SCALE])
    assert out["nodes"] == 200 and out["placed"] == 400


def test_generate_and_summarise(tmp_path: Path) -> None:
    generated = last_json(["bench/simulate_generate.py", "--out", str(tmp_path / "gen"),
                           "multigpu30"])
    assert (tmp_path / "gen" / "openb_pod_list_multigpu30.csv").exists(), generated
    results = tmp_path / "sim"
    results.mkdir()
    for policy, value in (("fgd", 5.0), ("fragmentation-aware", 4.0)):
        (results / f"default.{policy}.json").write_text(json.dumps(
            {"seed": 42, "unallocated_gpu_pct_at_100": value, "seconds": 1.0}))
    summary = last_json(["bench/simulate_summary.py", str(results)])
    assert summary["ours"]["default"]["fgd"]["unallocated"] == 5.0  # type: ignore[index]
