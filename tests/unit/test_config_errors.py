"""Configuration files that are refused: each error names the key, the value and what is allowed.

One table of bad documents (unknown keys, wrong types, out of range, bad choices, syntax),
separate from ``test_config``, which loads the good ones.
"""

from __future__ import annotations

import inspect
import sys

import pytest

from vgpu import config, policy
from vgpu.errors import ConfigError

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
