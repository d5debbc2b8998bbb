"""The config file's ``version`` (vgpu/config/version.py): v1 and files without one load,
anything else is refused with the versions this vgpu reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vgpu import config
from vgpu.config import Config
from vgpu.errors import ConfigError

#: (case, file text, the settings it gives).
LOADS: list[tuple[str, str, dict[str, Any]]] = [
    ("v1", "version: v1\ndeviceSplitCount: 4\n", {"device_split_count": 4}),
    ("no-version-is-v1", "deviceSplitCount: 4\n", {"device_split_count": 4}),
    ("only-the-version", "version: v1\n", {}),
    ("quoted-v1", "version: 'v1'\nschedulerName: mine\n", {"scheduler_name": "mine"}),
    ("json-v1", json.dumps({"version": "v1", "defaultCores": 25}), {"default_cores": 25}),
    ("json-without", json.dumps({"defaultCores": 25}), {"default_cores": 25}),
    ("empty-file-is-v1", "", {}),
]


@pytest.mark.parametrize(("text", "settings"), [(t, s) for _, t, s in LOADS],
                         ids=[c for c, _, _ in LOADS])
def test_these_versions_load(text: str, settings: dict[str, Any]) -> None:
    assert config.parse_text(text, "vgpu.yaml", {}) == Config(**settings)


#: (case, file text, what the error names besides the supported list).
REFUSED: list[tuple[str, str, str]] = [
    ("unknown-version", "version: v2\ndeviceSplitCount: 4\n", "'v2'"),
    ("capitalised", "version: V1\n", "'V1'"),
    ("kubernetes-style", "version: vgpu.io/v1\n", "'vgpu.io/v1'"),
    ("a-number", "version: 1\n", "1"),
    ("empty", "version:\n", "None"),
    ("a-list", "version: [v1]\n", "['v1']"),
    ("json-unknown", json.dumps({"version": "v0"}), "'v0'"),
]


@pytest.mark.parametrize(("text", "named"), [(t, n) for _, t, n in REFUSED],
                         ids=[c for c, _, _ in REFUSED])
def test_other_versions_are_refused_naming_the_supported_ones(text: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.parse_text(text, "vgpu.yaml", {})
    assert str(caught.value) == (f"vgpu.yaml: version: {named} is not a config version this "
                                 f"vgpu reads; supported: v1")


@pytest.mark.parametrize(("text", "message"), [
    # A section has no version: it is an unknown key there, as any other.
    ("scheduler:\n  version: v1\n", "scheduler.version: unknown key"),
    # A misspelt version is an unknown key; the allowed keys name the real one.
    ("versoin: v1\n", "versoin: unknown key; allowed here: "),
], ids=["in-a-section", "misspelt"])
def test_version_is_a_top_level_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="^vgpu.yaml: " + message) as caught:
        config.parse_text(text, "vgpu.yaml", {})
    if "allowed here" in message:
        assert "version" in str(caught.value).split("allowed here: ")[1].split(", ")


def test_the_environment_does_not_set_the_version() -> None:
    # The version describes a file's layout; it is no setting to override.
    with pytest.raises(ConfigError, match=r"\$VGPU_VERSION: unknown vgpu setting"):
        config.from_mapping({}, {"VGPU_VERSION": "v1"})


def test_the_dump_starts_with_the_version_and_loads_back(tmp_path: Path) -> None:
    dumped = config.to_mapping(Config())
    assert next(iter(dumped.items())) == ("version", "v1")
    path = tmp_path / "vgpu.json"
    path.write_text(json.dumps(dumped), encoding="utf-8")
    assert config.load(str(path), {}) == Config()


def test_explain_says_a_file_without_version_is_v1() -> None:
    key, default, doc = config.describe()[0]
    assert (key, json.loads(default)) == ("version", "v1")
    assert "without 'version' is read as v1" in doc and "supported: v1" in doc
