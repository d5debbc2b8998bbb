"""bench/bind.py's side by side with kube-scheduler: the ratios and targets from per-run
figures (pure), and bad arguments refused with a clear message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Appended: bench/ holds scripts whose names must not hide anything the tests import.
sys.path.append(str(ROOT / "bench"))

from _bind_report import side_by_side  # noqa: E402


def phase(rate: float, p99: float, cpu: float) -> dict[str, Any]:
    return {"pods_per_s": rate, "create_to_bound_p50_ms": p99 / 2,
            "create_to_bound_p99_ms": p99, "cpu_ms_per_pod": {"scheduler": cpu}}


def run(kube: float, whole: float, frac: float, *, p99: float = 900.0,
        cpu: float = 1.2) -> dict[str, Any]:
    return {"kube_scheduler_whole": phase(kube, 1000.0, 2.0),
            "vgpu_whole": phase(whole, p99, cpu), "vgpu_fractional": phase(frac, p99, cpu)}


def test_ratios_are_medians_of_each_runs_ratios() -> None:
    # Run 2's machine was slow for everyone: its ratios count, not its absolute figures.
    out = side_by_side([run(100, 110, 95), run(50, 40, 30), run(100, 105, 92)])
    assert out["vgpu_whole"]["pods_per_s"] == 105
    assert out["ratios"]["whole_pods_per_s"] == 1.05
    assert out["ratios"]["fractional_pods_per_s"] == 0.92
    assert out["ratios"]["whole_p99"] == 0.9
    assert out["targets_met"] == {"whole_pods_per_s": True, "whole_p99": True,
                                  "fractional_pods_per_s": True,
                                  "scheduler_cpu_ms_per_pod": True}


@pytest.mark.parametrize(("kwargs", "missed"), [
    ({"kube": 100, "whole": 99, "frac": 95}, "whole_pods_per_s"),
    ({"kube": 100, "whole": 120, "frac": 89}, "fractional_pods_per_s"),
    ({"kube": 100, "whole": 120, "frac": 95, "p99": 1001.0}, "whole_p99"),
    ({"kube": 100, "whole": 120, "frac": 95, "cpu": 1.6}, "scheduler_cpu_ms_per_pod"),
])
def test_each_target_can_be_missed(kwargs: dict[str, float], missed: str) -> None:
    met = side_by_side([run(**kwargs)])["targets_met"]  # type: ignore[arg-type]
    assert [name for name, ok in met.items() if not ok] == [missed]


@pytest.mark.parametrize("args", [["--pods", "0"], ["--against", "kube-scheduler",
                                                     "--kubeconfig", "x"]])
def test_bad_arguments_are_refused_without_a_traceback(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "bench/bind.py", *args], cwd=ROOT, check=False,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "error:" in done.stderr
