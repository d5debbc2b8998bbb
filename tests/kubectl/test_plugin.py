"""``kubectl vgpu ...``: the ``kubectl-vgpu`` command runs the ``vgpu`` command line it is
given (the e2e test runs it through a real kubectl)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from vgpu_kubectl import kubectl_vgpu

ROOT = Path(__file__).resolve().parents[2]


def test_the_console_script_is_the_plugin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["kubectl-vgpu"] == "vgpu_kubectl.kubectl_vgpu:main"
    commands = project["entry-points"]["vgpu.commands"]
    assert (commands["inspect"], commands["why"]) == ("vgpu_kubectl.inspect_cli",
                                                      "vgpu_kubectl.why_cli")


def test_it_passes_its_arguments_to_vgpu(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["kubectl-vgpu", "config", "defaults"])
    assert kubectl_vgpu.main() == 0
    assert json.loads(capsys.readouterr().out)["version"] == "v1"


def test_an_error_is_one_line_and_status_2(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["kubectl-vgpu", "config", "validate", "/nonexistent.yaml"])
    assert kubectl_vgpu.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("vgpu config: error: /nonexistent.yaml: cannot read")
    assert "Traceback" not in err
