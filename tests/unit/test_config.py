"""The typed configuration: defaults, files, round trips, and files that cannot be read.

Every rejected value is in ``test_config_errors``, the environment overrides in
``test_config_env``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from vgpu import config, policy
from vgpu.config import Config
from vgpu.errors import ConfigError


def test_defaults_match_design_section_2() -> None:
    c = Config()
    assert c.resource_names.all() == (
        "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage",
        "nvidia.com/gpucores", "nvidia.com/priority",
    )
    assert c.device_split_count == 10
    assert c.device_memory_scaling == 1.0
    assert c.default_mem == 0
    assert c.default_cores == 0
    assert c.disable_core_limit is False
    assert c.scheduler_name == "vgpu-scheduler"
    assert c.default_gpu_policy == "lowest-task-count"
    assert c.default_gpu_policy in policy.GPU_POLICIES
    assert c.default_node_policy in policy.NODE_POLICIES
    assert c.node_heartbeat_expiry_seconds > 0


def test_no_file_and_empty_environment_give_the_defaults() -> None:
    assert config.load(None, {}) == Config()
    assert config.from_mapping({}) == Config()
    assert config.parse_text("") == Config()
    assert config.parse_text("# only a comment\n") == Config()


def test_yaml_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text(
        "version: v1\n"
        "deviceSplitCount: 4\n"
        "deviceMemoryScaling: 1.5\n"
        "defaultMem: 1024\n"
        "disableCoreLimit: true\n"
        "resourceNames:\n"
        "  gpu: example.com/vgpu\n"
        "scheduler:\n"
        "  permitTimeoutSeconds: 5\n"
        "defaultGpuPolicy: binpack\n",
        encoding="utf-8",
    )
    c = config.load(str(path), {})
    assert c.device_split_count == 4
    assert c.device_memory_scaling == 1.5
    assert c.default_mem == 1024
    assert c.disable_core_limit is True
    assert c.resource_names.gpu == "example.com/vgpu"
    assert c.resource_names.gpumem == "nvidia.com/gpumem"
    assert c.scheduler.permit_timeout_seconds == 5.0
    assert isinstance(c.scheduler.permit_timeout_seconds, float)
    assert c.default_gpu_policy == "binpack"


def test_json_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.json"
    path.write_text(json.dumps({"version": "v1", "defaultCores": 25, "webhook": {"port": 8443},
                                "nodeagent": {"hamiCorePath": "/usr/lib/libvgpu.so"}}),
                    encoding="utf-8")
    c = config.load(str(path), {})
    assert c.default_cores == 25
    assert c.webhook.port == 8443
    assert c.nodeagent.hami_core_path == "/usr/lib/libvgpu.so"


# --- round trips -------------------------------------------------------------------------

NON_DEFAULT = {
    "deviceSplitCount": 3, "deviceMemoryScaling": 2.5, "defaultMem": 512, "defaultCores": 10,
    "disableCoreLimit": True, "schedulerName": "other", "defaultGpuPolicy": "spread",
    "defaultNodePolicy": "spread", "nodeHeartbeatExpirySeconds": 60.0,
    "resourceNames": {"gpu": "a/b"}, "webhook": {"port": 1443},
    "scheduler": {"assumeTtlSeconds": 10.0}, "nodeagent": {"healthQuietSeconds": 0.0},
}


@pytest.mark.parametrize("mapping", [{}, NON_DEFAULT], ids=["defaults", "non-default"])
def test_to_mapping_round_trips(mapping: dict[str, Any]) -> None:
    c = config.from_mapping(mapping)
    dumped = config.to_mapping(c)
    assert config.from_mapping(dumped) == c
    # ... and through the text a file would hold, in both syntaxes.
    assert config.parse_text(json.dumps(dumped)) == c
    assert config.parse_text(yaml.safe_dump(dumped)) == c


def test_to_mapping_uses_camel_case_keys() -> None:
    dumped = config.to_mapping(Config())
    assert dumped["deviceSplitCount"] == 10
    assert dumped["resourceNames"]["gpumemPercentage"] == "nvidia.com/gpumem-percentage"
    assert dumped["scheduler"]["permitTimeoutSeconds"] == 30.0


def _flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_describe_lists_every_key_with_its_default_and_a_doc() -> None:
    flat = _flatten(config.to_mapping(Config()))
    rows = config.describe()
    assert [key for key, _, _ in rows] == list(flat)
    for key, default, doc in rows:
        assert json.loads(default) == flat[key]
        assert doc, f"{key} has no doc"


# --- files that cannot be read -----------------------------------------------------------

def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read"):
        config.load(str(missing), {})


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        config.load(str(tmp_path), {})


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text("deviceSplitCount: 3\n", encoding="utf-8")
    path.chmod(0)
    try:
        with open(path, encoding="utf-8"):
            pytest.skip("running as a user that can read any file (root)")
    except PermissionError:
        pass
    try:
        with pytest.raises(ConfigError, match="cannot read"):
            config.load(str(path), {})
    finally:
        path.chmod(0o600)


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_bytes(b"\xff\xfe\x00deviceSplitCount: 3")
    with pytest.raises(ConfigError, match="UTF-8"):
        config.load(str(path), {})


def test_bad_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text("deviceSplitCount: 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"vgpu\.yaml: deviceSplitCount"):
        config.load(str(path), {})
