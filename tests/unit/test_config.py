"""The typed configuration: defaults, files, environment overrides and every rejection."""

from __future__ import annotations

import inspect
import json
import sys
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
    path.write_text(json.dumps({"defaultCores": 25, "webhook": {"port": 8443},
                                "nodeagent": {"hamiCorePath": "/usr/lib/libvgpu.so"}}),
                    encoding="utf-8")
    c = config.load(str(path), {})
    assert c.default_cores == 25
    assert c.webhook.port == 8443
    assert c.nodeagent.hami_core_path == "/usr/lib/libvgpu.so"


# --- rejections: key, value and what is allowed ----------------------------------------------

BAD: list[tuple[str, str, tuple[str, ...]]] = [
    # unknown keys: named, with the allowed keys of that level
    ("unknown-top-level-key", "deviceSplitCnt: 3",
     ("deviceSplitCnt", "unknown key", "deviceSplitCount", "defaultMem", "scheduler")),
    ("snake-case-is-unknown", "device_split_count: 3",
     ("device_split_count", "unknown key", "deviceSplitCount")),
    ("unknown-nested-key", "scheduler:\n  permitTimeout: 3",
     ("scheduler.permitTimeout", "unknown key", "permitTimeoutSeconds", "assumeTtlSeconds")),
    ("unknown-resource-name-key", "resourceNames:\n  gpus: x",
     ("resourceNames.gpus", "unknown key", "gpu", "gpumemPercentage")),
    ("non-string-keys", "1: a\nfoo: b", ("unknown key", "deviceSplitCount")),
    # wrong types
    ("int-gets-string", "deviceSplitCount: ten", ("deviceSplitCount", "'ten'", "an integer")),
    ("int-gets-float", "deviceSplitCount: 5.5", ("deviceSplitCount", "5.5", "an integer")),
    ("int-gets-bool", "defaultMem: true", ("defaultMem", "True", "an integer")),
    ("float-gets-string", "deviceMemoryScaling: big",
     ("deviceMemoryScaling", "'big'", "a number")),
    ("float-gets-bool", "deviceMemoryScaling: false", ("deviceMemoryScaling", "a number")),
    ("bool-gets-string", "disableCoreLimit: 'yes'",
     ("disableCoreLimit", "'yes'", "true or false")),
    ("bool-gets-int", "disableCoreLimit: 1", ("disableCoreLimit", "1", "true or false")),
    ("string-gets-int", "schedulerName: 5", ("schedulerName", "5", "a string")),
    ("section-gets-scalar", "scheduler: 5", ("scheduler", "5", "mapping")),
    ("section-gets-list", "webhook: [1]", ("webhook", "mapping")),
    ("top-level-list", "- deviceSplitCount", ("mapping",)),
    ("top-level-scalar", "hello", ("mapping", "'hello'")),
    # out of range
    ("split-count-0", "deviceSplitCount: 0", ("deviceSplitCount", "0", "at least 1")),
    ("split-count-huge", "deviceSplitCount: 5000", ("deviceSplitCount", "5000", "at most 1024")),
    ("scaling-0", "deviceMemoryScaling: 0", ("deviceMemoryScaling", "0", "at least 0.01")),
    ("default-mem-negative", "defaultMem: -1", ("defaultMem", "-1", "at least 0")),
    ("default-cores-101", "defaultCores: 101", ("defaultCores", "101", "at most 100")),
    ("port-0", "webhook:\n  port: 0", ("webhook.port", "0", "at least 1")),
    ("port-huge", "scheduler:\n  metricsPort: 70000",
     ("scheduler.metricsPort", "70000", "at most 65535")),
    ("permit-timeout-0", "scheduler:\n  permitTimeoutSeconds: 0",
     ("scheduler.permitTimeoutSeconds", "0", "at least 0.1")),
    ("scaling-nan", "deviceMemoryScaling: .nan", ("deviceMemoryScaling", "nan", "finite")),
    ("timeout-inf", "scheduler:\n  permitTimeoutSeconds: .inf",
     ("scheduler.permitTimeoutSeconds", "inf", "finite")),
    ("huge-integer", "deviceSplitCount: 1" + "0" * 5000, ("not valid YAML",)),
    # bad choices
    ("gpu-policy", "defaultGpuPolicy: worst-fit",
     ("defaultGpuPolicy", "'worst-fit'", ", ".join(policy.GPU_POLICIES))),
    ("node-policy", "defaultNodePolicy: lowest-task-count",
     ("defaultNodePolicy", "'lowest-task-count'", "binpack, spread")),
    # syntax
    ("invalid-yaml", "deviceSplitCount: [1,\n", ("not valid YAML",)),
    ("invalid-json", '{"deviceSplitCount": }', ("not valid JSON",)),
    ("json-huge-integer", '{"deviceSplitCount": 1' + "0" * 5000 + "}", ("not valid JSON",)),
    ("json-too-deep", "{" + '"a":{' * 50_000, ("not valid JSON",)),
]


@pytest.mark.parametrize(("text", "fragments"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_config_is_rejected_with_key_value_and_allowed(text: str,
                                                          fragments: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as caught:
        config.parse_text(text, "vgpu.yaml", {})
    message = str(caught.value)
    assert message.startswith("vgpu.yaml: ")
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_too_deep_yaml_is_a_config_error() -> None:
    # PyYAML needs seconds to nest past the default recursion limit; lower the limit
    # instead, keeping room for the frames pytest already uses.
    depth = len(inspect.stack(0))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 150)
    try:
        with pytest.raises(ConfigError, match="not valid YAML"):
            config.parse_text("a: " + "[" * 300 + "]" * 300)
    finally:
        sys.setrecursionlimit(old)


# --- environment overrides ---------------------------------------------------------------

ENV: list[tuple[str, dict[str, str], str, object]] = [
    ("split-count", {"VGPU_DEVICE_SPLIT_COUNT": "5"}, "device_split_count", 5),
    ("split-count-spaces", {"VGPU_DEVICE_SPLIT_COUNT": " 5 "}, "device_split_count", 5),
    ("scaling", {"VGPU_DEVICE_MEMORY_SCALING": "1.5"}, "device_memory_scaling", 1.5),
    ("scaling-int-text", {"VGPU_DEVICE_MEMORY_SCALING": "2"}, "device_memory_scaling", 2.0),
    ("bool-true", {"VGPU_DISABLE_CORE_LIMIT": "true"}, "disable_core_limit", True),
    ("bool-TRUE", {"VGPU_DISABLE_CORE_LIMIT": "TRUE"}, "disable_core_limit", True),
    ("bool-1", {"VGPU_DISABLE_CORE_LIMIT": "1"}, "disable_core_limit", True),
    ("bool-0", {"VGPU_DISABLE_CORE_LIMIT": "0"}, "disable_core_limit", False),
    ("bool-false", {"VGPU_DISABLE_CORE_LIMIT": "false"}, "disable_core_limit", False),
    ("string", {"VGPU_SCHEDULER_NAME": "my-sched"}, "scheduler_name", "my-sched"),
    ("choice", {"VGPU_DEFAULT_NODE_POLICY": "spread"}, "default_node_policy", "spread"),
    ("section", {"VGPU_SCHEDULER__PERMIT_TIMEOUT_SECONDS": "3"},
     "scheduler.permit_timeout_seconds", 3.0),
    ("resource-name", {"VGPU_RESOURCE_NAMES__GPUMEM": "example.com/vmem"},
     "resource_names.gpumem", "example.com/vmem"),
    ("nodeagent", {"VGPU_NODEAGENT__METRICS_PORT": "9999"}, "nodeagent.metrics_port", 9999),
    ("config-file-variable-ignored", {"VGPU_CONFIG": "/etc/vgpu.yaml"},
     "device_split_count", 10),
    ("log-variables-ignored", {"VGPU_LOG_LEVEL": "debug", "VGPU_LOG_FORMAT": "json"},
     "device_split_count", 10),
    ("other-variables-ignored", {"PATH": "/bin", "HOME": "/root", "vgpu_lower": "x"},
     "device_split_count", 10),
]


def _attr(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize(("env", "attr", "expected"), [e[1:] for e in ENV],
                         ids=[e[0] for e in ENV])
def test_environment_overrides(env: dict[str, str], attr: str, expected: object) -> None:
    got = _attr(config.load(None, env), attr)
    assert got == expected
    assert type(got) is type(expected)


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text("deviceSplitCount: 4\nscheduler:\n  permitTimeoutSeconds: 9\n",
                    encoding="utf-8")
    c = config.load(str(path), {"VGPU_DEVICE_SPLIT_COUNT": "6"})
    assert c.device_split_count == 6
    assert c.scheduler.permit_timeout_seconds == 9.0


BAD_ENV: list[tuple[str, dict[str, str], tuple[str, ...]]] = [
    ("unknown-variable", {"VGPU_DEVICE_SPLITCOUNT": "5"},
     ("$VGPU_DEVICE_SPLITCOUNT", "unknown")),
    ("unknown-section-variable", {"VGPU_SCHEDULER__NOPE": "1"}, ("$VGPU_SCHEDULER__NOPE",)),
    ("single-underscore-section", {"VGPU_SCHEDULER_PERMIT_TIMEOUT_SECONDS": "3"},
     ("$VGPU_SCHEDULER_PERMIT_TIMEOUT_SECONDS",)),
    ("section-itself", {"VGPU_SCHEDULER": "x"}, ("$VGPU_SCHEDULER",)),
    ("not-an-int", {"VGPU_DEVICE_SPLIT_COUNT": "five"},
     ("deviceSplitCount", "$VGPU_DEVICE_SPLIT_COUNT", "'five'", "an integer")),
    ("empty-int", {"VGPU_DEVICE_SPLIT_COUNT": ""}, ("deviceSplitCount", "an integer")),
    ("float-for-int", {"VGPU_DEFAULT_MEM": "1.5"}, ("defaultMem", "'1.5'")),
    ("not-a-bool", {"VGPU_DISABLE_CORE_LIMIT": "maybe"},
     ("disableCoreLimit", "'maybe'", "true or false")),
    ("not-a-number", {"VGPU_SCHEDULER__PERMIT_TIMEOUT_SECONDS": "soon"},
     ("scheduler.permitTimeoutSeconds", "$VGPU_SCHEDULER__PERMIT_TIMEOUT_SECONDS", "'soon'")),
    ("out-of-range", {"VGPU_DEVICE_SPLIT_COUNT": "0"}, ("deviceSplitCount", "at least 1")),
    ("nan", {"VGPU_DEVICE_MEMORY_SCALING": "nan"}, ("deviceMemoryScaling", "finite")),
    ("inf", {"VGPU_NODE_HEARTBEAT_EXPIRY_SECONDS": "inf"},
     ("nodeHeartbeatExpirySeconds", "finite")),
    ("bad-choice", {"VGPU_DEFAULT_GPU_POLICY": "worst"},
     ("defaultGpuPolicy", "'worst'", "lowest-task-count")),
]


@pytest.mark.parametrize(("env", "fragments"), [b[1:] for b in BAD_ENV],
                         ids=[b[0] for b in BAD_ENV])
def test_bad_environment_is_rejected(env: dict[str, str], fragments: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as caught:
        config.load(None, env)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


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
