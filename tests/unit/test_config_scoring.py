"""The scheduler's scoring keys read together: kube-scheduler's percentageOfNodesToScore,
the deprecated nodesToScore an older config still loads with, and the warnings the
scheduler gives at start (and ``vgpu config validate`` prints)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vgpu import config
from vgpu.config import SchedulerConfig, scoring_keys
from vgpu.config import cli as config_cli
from vgpu.errors import ConfigError


@pytest.mark.parametrize(("text", "percentage", "warned"), [
    ("", 0, False),
    ("scheduler:\n  percentageOfNodesToScore: 40\n", 40, False),
    ("scheduler:\n  percentageOfNodesToScore: 100\n", 100, False),
    # The old default, and the old "every feasible node".
    ("scheduler:\n  nodesToScore: 64\n", 0, True),
    ("scheduler:\n  nodesToScore: 0\n", 100, True),
    ("scheduler:\n  nodesToScore: 3000\n", 0, True),
])
def test_how_many_nodes_to_score(text: str, percentage: int, warned: bool) -> None:
    section = config.parse_text(text).scheduler
    assert scoring_keys.percentage_to_score(section) == percentage
    warnings = scoring_keys.warnings(section)
    assert bool(warnings) is warned
    if warned:
        assert "nodesToScore" in warnings[0] and f"percentageOfNodesToScore: {percentage}" \
            in warnings[0]


@pytest.mark.parametrize(("text", "message"), [
    ("scheduler:\n  percentageOfNodesToScore: 101\n", "at most 100"),
    ("scheduler:\n  percentageOfNodesToScore: -1\n", "at least 0"),
    ("scheduler:\n  nodesToScore: -2\n", "at least -1"),
    ("scheduler:\n  nodesToScore: 64\n  percentageOfNodesToScore: 10\n",
     "keep percentageOfNodesToScore alone"),
])
def test_bad_scoring_keys_are_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config.parse_text(text)


def test_the_defaults_weigh_no_gpu_placement_above_a_soft_rule() -> None:
    assert scoring_keys.warnings(SchedulerConfig()) == []


def test_a_gpu_placement_weighed_above_a_soft_rule_is_warned_about() -> None:
    section = SchedulerConfig(score_weights=("VGPU=3",))
    [warning] = scoring_keys.warnings(section)
    assert warning.startswith("scheduler.scoreWeights: VGPU=3 weighs the GPU placement")
    assert "NodeAffinity=2" in warning and "InterPodAffinity=2" in warning
    assert "TaintToleration" not in warning


def test_config_validate_prints_the_warnings(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "vgpu.yaml"
    path.write_text("version: v1\nscheduler:\n  nodesToScore: 64\n")
    args = argparse.Namespace(action="validate", file=str(path))
    assert config_cli.run(args) == 0
    out = capsys.readouterr()
    assert "valid" in out.out
    assert "warning: scheduler.nodesToScore: 64 is deprecated" in out.err
