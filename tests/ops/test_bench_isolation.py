"""bench/isolation.py on a machine without a GPU: a clear message and exit status 2, one
JSON line, no traceback. NVML is the pynvml stand-in failing as it does without a driver,
so the test means the same on a machine that has a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RUN = """
import runpy, sys
from tests.nodeagent import fake_pynvml
sys.modules["pynvml"] = fake_pynvml.FakeNvml([], init_error={error})
sys.argv = ["bench/isolation.py"]
runpy.run_path("bench/isolation.py", run_name="__main__")
"""


@pytest.mark.parametrize(("error", "words"), [
    (12, "NVML Shared Library Not Found"),  # no driver
    (999, "Unknown Error"),
])
def test_without_a_gpu_it_says_so(error: int, words: str) -> None:
    done = subprocess.run([sys.executable, "-c", RUN.format(error=error)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "no NVIDIA GPU to check" in done.stderr and words in done.stderr
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert "no NVIDIA GPU to check" in last["error"]


def test_a_machine_whose_nvml_lists_no_gpu() -> None:
    code = RUN.replace("init_error={error}", "init_error=None")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "NVML lists no GPU" in done.stderr
