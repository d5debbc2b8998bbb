"""The MPS control stand-in (tests/support/fake_mps_control.py) wired into a config."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from vgpu.config import Config, from_mapping

FAKE_CONTROL = str(Path(__file__).resolve().parents[1] / "support" / "fake_mps_control.py")


def mps_settings(root: Path, **extra: Any) -> dict[str, Any]:
    return {"controlCommand": f"{sys.executable} {FAKE_CONTROL}",
            "pipeDir": str(root / "pipe"), "logDir": str(root / "log"),
            "checkSeconds": 0.05, "restartBackoffSeconds": 0.05,
            "restartBackoffMaxSeconds": 0.2, **extra}


def mps_config(root: Path, **extra: Any) -> Config:
    return from_mapping({"isolation": {"mode": "mps", "mps": mps_settings(root, **extra)}})


def commands(root: Path) -> list[dict[str, Any]]:
    path = root / "log" / "commands.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def kill_daemon(root: Path) -> None:
    os.unlink(root / "pipe" / "control")
