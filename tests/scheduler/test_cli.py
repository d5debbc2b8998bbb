"""`vgpu scheduler`'s command line: flags, their checks, and errors without tracebacks."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_resources import Recorder
from vgpu import cli as vgpu_cli
from vgpu.errors import ConfigError
from vgpu.kube.adapter import KubeCluster
from vgpu_scheduler import cli

ROOT = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    args = ["scheduler", *argv]
    return vgpu_cli.build_parser(args).parse_args(args)


def test_the_manifests_flags() -> None:
    args = parse("--leader-elect", "--lease-name=vgpu-scheduler",
                 "--lease-namespace=vgpu-system")
    election = cli.election_config(args)
    assert election is not None
    assert (election.namespace, election.name) == ("vgpu-system", "vgpu-scheduler")
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (
        15.0, 10.0, 2.0)
    assert election.identity  # $POD_NAME, or the host name made unique


def test_no_election_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.election_config(parse()) is None
    monkeypatch.setenv("POD_NAME", "vgpu-scheduler-7d4-abc")
    monkeypatch.setenv("POD_NAMESPACE", "gpu-system")
    election = cli.election_config(parse("--leader-elect"))
    assert election is not None
    assert (election.identity, election.namespace) == ("vgpu-scheduler-7d4-abc", "gpu-system")


@pytest.mark.parametrize("elect", [True, False])
def test_every_write_is_bounded_in_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        elect: bool) -> None:
    """The scheduler's and its events' writes by writeTimeoutSeconds, which the next
    leader counts on; the Lease's renewals by the renew deadline (issue 46)."""
    monkeypatch.delenv("VGPU_CONFIG", raising=False)
    path = tmp_path / "config.yaml"
    path.write_text("scheduler:\n  writeTimeoutSeconds: 3.5\n")
    args = parse("--config", str(path), *(("--leader-elect", "--renew-deadline=7")
                                          if elect else ()))
    built: list[tuple[float, int]] = []

    def fake_connect(kubeconfig: str | None, **kw: Any) -> KubeCluster:
        built.append((kw["qps"], kw["pool_size"]))
        return KubeCluster(Recorder(), qps=0)

    monkeypatch.setattr(cli, "connect", fake_connect)
    cfg = cli.load_config(args)
    conns = cli.connections(None, cfg.scheduler, cli.election_config(args))
    assert (conns.cluster.write_timeout, conns.events.write_timeout) == (3.5, 3.5)
    if elect:
        assert conns.leases is not None and conns.leases.write_timeout == 7.0
    else:
        assert conns.leases is None
    assert len(built) == 2 + elect


@pytest.mark.parametrize(("argv", "message"), [
    (("--leader-elect", "--lease-duration=5", "--renew-deadline=5"), "--renew-deadline <"),
    (("--leader-elect", "--retry-period=0"), "0 < --retry-period"),
    (("--leader-elect", "--lease-name="), "must not be empty"),
])
def test_bad_election_flags(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cli.election_config(parse(*argv))


def test_flags_override_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VGPU_CONFIG", raising=False)
    path = tmp_path / "config.yaml"
    path.write_text("scheduler:\n  apiQps: 100\n  apiBurst: 200\n  metricsPort: 9000\n")
    cfg = cli.load_config(parse("--config", str(path)))
    assert (cfg.scheduler.api_qps, cfg.scheduler.api_burst, cfg.scheduler.metrics_port) == (
        100, 200, 9000)
    cfg = cli.load_config(parse("--config", str(path), "--kube-api-qps=1000",
                                "--kube-api-burst=2000", "--metrics-port=0"))
    assert (cfg.scheduler.api_qps, cfg.scheduler.api_burst, cfg.scheduler.metrics_port) == (
        1000, 2000, 0)


@pytest.mark.parametrize(("argv", "message"), [
    (("--kube-api-qps=-1",), "must be 0 or more"),
    (("--kube-api-burst=0",), "must be 1 or more"),
    (("--metrics-port=70000",), "between 0 and 65535"),
])
def test_bad_flags(argv: tuple[str, ...], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VGPU_CONFIG", raising=False)
    with pytest.raises(ConfigError, match=message):
        cli.load_config(parse(*argv))


def test_an_unreadable_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "vgpu.cli", "scheduler", "--kubeconfig",
                           str(tmp_path / "missing")], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("vgpu scheduler: error: cannot ")
    assert "Traceback" not in proc.stderr
