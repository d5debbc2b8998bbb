"""The ``vgpu`` command, run as a user runs it: a separate process."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vgpu import __version__, cli, config
from vgpu.cli import Subcommand, main, subcommands
from vgpu.config import Config

EXPECTED_SUBCOMMANDS = ("webhook", "scheduler", "nodeagent", "certs", "simulate", "inspect",
                        "config", "why")


def vgpu(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # A clean environment: a VGPU_* variable of the developer's shell must not leak in.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    clean.update(env or {})
    return subprocess.run([sys.executable, "-m", "vgpu.cli", *args], capture_output=True,
                          text=True, env=clean, timeout=60, check=False)


def test_help_lists_every_subcommand() -> None:
    done = vgpu("--help")
    assert done.returncode == 0, done.stderr
    for name in EXPECTED_SUBCOMMANDS:
        assert f"    {name}" in done.stdout, f"{name} missing from --help"
    assert {c.name for c in subcommands()} == set(EXPECTED_SUBCOMMANDS)


def test_help_imports_no_subcommand() -> None:
    # Listing the commands reads their help from source; importing them would pull in
    # aiohttp, grpc, numpy and the kubernetes client on every `vgpu --help`.
    heavy = [c.target for c in subcommands()] + ["aiohttp", "grpc", "numpy", "kubernetes"]
    code = ("import json, sys\nfrom vgpu.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    imported = json.loads(done.stdout.splitlines()[-1])
    assert [m for m in heavy if m in imported] == []


def test_listed_help_is_each_modules_help() -> None:
    for cmd in subcommands():
        module = importlib.import_module(cmd.target)
        assert cmd.summary() == module.HELP, cmd.name
        assert module.HELP and "\n" not in module.HELP


def test_version() -> None:
    done = vgpu("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"vgpu {__version__}"


def test_config_defaults_prints_the_default_config_as_json() -> None:
    done = vgpu("config", "defaults")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == config.to_mapping(Config())


def test_config_validate_good_file(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text("version: v1\ndeviceSplitCount: 4\nscheduler:\n  permitTimeoutSeconds: 5\n",
                    encoding="utf-8")
    done = vgpu("config", "validate", str(path))
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout
    shown = json.loads(done.stdout.split("\n", 1)[1])
    assert shown["deviceSplitCount"] == 4
    assert shown["scheduler"]["permitTimeoutSeconds"] == 5.0


def test_config_validate_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text("deviceSplitCount: 0\n", encoding="utf-8")
    done = vgpu("config", "validate", str(path))
    assert done.returncode == 2
    assert "deviceSplitCount" in done.stderr
    assert "at least 1" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_config_validate_applies_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text("{}", encoding="utf-8")
    done = vgpu("config", "validate", str(path), env={"VGPU_DEVICE_SPLITS": "3"})
    assert done.returncode == 2
    assert "$VGPU_DEVICE_SPLITS" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def broken_distribution(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that also sees an installed distribution whose
    ``vgpu.commands`` entry point names a module that is not there."""
    info = tmp_path / "vgpu_broken-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vgpu-broken\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[vgpu.commands]\nbroken = vgpu_no_such.cli\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path),
                                                         os.environ.get("PYTHONPATH")]))}


def test_a_subcommand_that_cannot_be_imported_says_so(
        broken_distribution: dict[str, str]) -> None:
    name = "broken"
    done = vgpu(name, env=broken_distribution)
    assert done.returncode == 2
    assert "not available" in done.stderr
    assert f"vgpu {name}" in done.stderr
    assert "vgpu_no_such.cli" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_help_lists_a_broken_subcommand_and_every_other(
        broken_distribution: dict[str, str]) -> None:
    done = vgpu("--help", env=broken_distribution)
    assert done.returncode == 0, done.stderr
    assert "    broken    (not available" in done.stdout
    for name in EXPECTED_SUBCOMMANDS:
        assert f"    {name}" in done.stdout, f"{name} missing from --help"
    assert vgpu("config", "defaults", env=broken_distribution).returncode == 0


# In-process from here on: the same main(), without a process start per case.

@pytest.fixture(autouse=True)
def _keep_logging_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # main() configures structlog for the process; in-process that would bind the loggers
    # of later tests to this test's captured (then closed) stderr.
    monkeypatch.setattr("vgpu.logs.setup", lambda *a, **k: None)


def _also_installed(monkeypatch: pytest.MonkeyPatch, *extra: Subcommand) -> None:
    installed = subcommands()
    monkeypatch.setattr(cli, "subcommands", lambda: (*installed, *extra))


@pytest.mark.parametrize("target", ["vgpu_no_such.cli", "vgpu.errors"],
                         ids=["missing-module", "not-a-command"])
def test_unavailable_subcommand_with_options_still_says_not_available(
        target: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _also_installed(monkeypatch, Subcommand("broken", target))
    # Options of the command must not turn into "unrecognized arguments".
    assert main(["broken", "--config", "x.yaml", "extra"]) == 2
    err = capsys.readouterr().err
    assert "not available" in err
    assert "unrecognized" not in err
    assert err.startswith("vgpu broken: error: ") and err.count("\n") == 1


def test_no_installed_subcommands_says_how_to_install(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "subcommands", tuple)
    with pytest.raises(SystemExit) as caught:
        main(["scheduler"])
    assert caught.value.code == 2
    assert "pip install" in capsys.readouterr().err


@pytest.mark.parametrize("name", EXPECTED_SUBCOMMANDS)
def test_every_subcommand_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main([name, "--help"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: vgpu {name} ")


def test_no_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["frobnicate"])
    assert caught.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_unknown_option_of_a_built_subcommand_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["config", "defaults", "--bogus"])
    assert caught.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_config_requires_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["config"])
    assert caught.value.code == 2
    assert "ACTION" in capsys.readouterr().err


def test_config_defaults_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "defaults", "--explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(config.describe())
    # The file's version first, then the settings.
    assert lines[0].startswith("version ") and "read as v1" in lines[0]
    assert lines[1].startswith("resourceNames.gpu ")


def test_config_validate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("VGPU_"):
            monkeypatch.delenv(key)
    assert main(["config", "validate", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert "vgpu config: error:" in err
    assert "cannot read" in err
