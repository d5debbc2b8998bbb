"""``VGPU_*`` environment overrides: typed like the file, winning over it, refused by name.

Separate from ``test_config`` (files and defaults): the environment has its own naming
(``__`` between a section and its key) and its own rejections.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vgpu import config
from vgpu.errors import ConfigError

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
    path.write_text("version: v1\ndeviceSplitCount: 4\nscheduler:\n  permitTimeoutSeconds: 9\n",
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



_TOOLING_NAMES = (r"environ(?:\.get)?[\[(]\s*\"(VGPU_[A-Z0-9_]+)\"", r"\$\{?(VGPU_[A-Z0-9_]+)")


def _vgpu_variables(text: str) -> set[str]:
    import re

    return {name for pattern in _TOOLING_NAMES for name in re.findall(pattern, text)}


def test_the_scan_for_tooling_variables_finds_python_and_shell_reads() -> None:
    sample = 'os.environ.get("VGPU_A")\nos.environ["VGPU_B"]\nx="${VGPU_C:-1}"\necho $VGPU_D'
    assert _vgpu_variables(sample) == {"VGPU_A", "VGPU_B", "VGPU_C", "VGPU_D"}


def test_the_repositorys_own_tooling_variables_are_not_read_as_settings() -> None:
    # Tests, benches and build scripts pass their environment on to the components they
    # start, which refuse an unknown VGPU_* variable: tooling variables use VGPUDEV_*.
    root = Path(__file__).resolve().parents[2]
    named: set[str] = set()
    for folder in ("tests", "bench", ".ci"):
        for path in (root / folder).rglob("*"):
            # The config and CLI tests name wrong variables on purpose.
            if path.is_file() and path.suffix in {".py", ".sh", ""} \
                    and not path.name.startswith(("test_config", "test_cli")):
                named |= _vgpu_variables(path.read_text(errors="replace"))
    unknown = []
    for name in sorted(named):
        try:
            config.from_mapping({}, env={name: "1"})
        except ConfigError as exc:  # "1" may be a bad value; only an unknown name matters
            if "unknown vgpu setting" in str(exc):
                unknown.append(name)
    assert unknown == []
