"""The ``--config`` option every component command shares."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vgpu.config import cli as config_cli


def test_config_option_defaults_to_vgpu_config_and_loads_with_overrides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text("version: v1\ndeviceSplitCount: 4\nschedulerName: mine\n")
    monkeypatch.setenv("VGPU_CONFIG", str(path))
    monkeypatch.setenv("VGPU_SCHEDULER_NAME", "from-env")
    parser = argparse.ArgumentParser()
    config_cli.add_config_option(parser)
    args = parser.parse_args([])
    assert args.config == str(path)
    cfg = config_cli.load_config(args)
    assert (cfg.device_split_count, cfg.scheduler_name) == (4, "from-env")
    assert parser.parse_args(["--config", "other.yaml"]).config == "other.yaml"
