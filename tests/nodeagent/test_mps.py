"""The MPS control daemon's supervisor, driven through the recording stand-in."""

from __future__ import annotations

from pathlib import Path

from tests.nodeagent.mps_support import commands, kill_daemon, mps_config
from vgpu_nodeagent.isolation.mps import FAILED, PROBE, RUNNING, STOPPED, MpsDaemon


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def daemon(root: Path, clock: Clock | None = None, **extra: object) -> MpsDaemon:
    return MpsDaemon(mps_config(root, **extra).isolation.mps, clock=clock or Clock())


def test_starts_the_daemon_with_host_folders(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    assert d.status().state == STOPPED
    d.tick()
    assert d.status().state == RUNNING and d.status().error is None
    calls = commands(tmp_path)
    # no pipe folder yet, so nothing to adopt: start, then probe (it answers)
    assert [c["argv"] for c in calls] == [["-d"], []]
    assert calls[1]["stdin"] == PROBE + "\n"
    assert {c["pipe"] for c in calls} == {str(tmp_path / "pipe")}
    assert {c["log"] for c in calls} == {str(tmp_path / "log")}
    assert (tmp_path / "pipe").is_dir() and (tmp_path / "log").is_dir()


def test_a_running_daemon_is_adopted_not_started_again(tmp_path: Path) -> None:
    daemon(tmp_path).tick()
    again = daemon(tmp_path)
    again.tick()
    assert again.running
    assert [c["argv"] for c in commands(tmp_path)].count(["-d"]) == 1
    assert again.status().starts == 0


def test_a_dead_daemon_is_restarted(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    d.tick()
    kill_daemon(tmp_path)
    d.tick()
    status = d.status()
    assert status.state == RUNNING and status.restarts == 1 and status.starts == 2
    assert [c["argv"] for c in commands(tmp_path)].count(["-d"]) == 2


def test_a_daemon_that_will_not_start_is_retried_with_backoff(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "refuse").touch()
    clock = Clock()
    d = daemon(tmp_path, clock)
    d.tick()
    status = d.status()
    assert status.state == FAILED
    assert status.error is not None and "exited 1" in status.error
    assert "could not be started" in status.error

    def tries() -> int:
        return [c["argv"] for c in commands(tmp_path)].count(["-d"])

    assert tries() == 1
    d.tick()  # the backoff (0.05 s) has not passed
    assert tries() == 1
    waits = []
    for _ in range(4):
        before = clock.now
        while tries() == len(waits) + 1:
            clock.now += 0.01
            d.tick()
        waits.append(round(clock.now - before, 2))
    # doubling from 0.05 s, capped at 0.2 s
    assert waits == [0.05, 0.1, 0.2, 0.2]
    (tmp_path / "log" / "refuse").unlink()
    clock.now += 1
    d.tick()
    assert d.running and d.status().error is None


def test_a_missing_control_program_is_a_clear_error(tmp_path: Path) -> None:
    d = daemon(tmp_path, controlCommand=str(tmp_path / "no-such-mps-control"))
    d.tick()
    status = d.status()
    assert status.state == FAILED
    assert status.error is not None and "not found" in status.error
    assert "isolation.mps.controlCommand" in status.error


def test_a_removed_pipe_folder_is_a_dead_daemon(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    d.tick()
    kill_daemon(tmp_path)
    (tmp_path / "pipe").rmdir()
    assert not d.alive()
    d.tick()
    assert d.running and (tmp_path / "pipe").is_dir()


def test_one_missed_probe_is_asked_again_not_restarted(tmp_path: Path) -> None:
    """A probe that goes unanswered once (a busy daemon) is followed by another before
    any ``-d``: a second daemon would fail beside the first (issue 24)."""
    d = daemon(tmp_path)
    d.tick()
    (tmp_path / "log" / "miss-once").touch()
    d.tick()
    status = d.status()
    assert status.state == RUNNING and status.restarts == 0 and status.starts == 1
    assert [c["argv"] for c in commands(tmp_path)].count(["-d"]) == 1
    assert not (tmp_path / "log" / "miss-once").exists()  # the miss was really probed


def test_a_daemon_up_after_a_failed_start_is_adopted_not_started_again(
        tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "refuse").touch()
    clock = Clock()
    d = daemon(tmp_path, clock)
    d.tick()
    assert d.status().state == FAILED
    # The daemon comes up by other means (it was slow to make its pipe, or an operator
    # started it): the retry finds it answering and runs no -d.
    (tmp_path / "pipe" / "control").touch()
    clock.now += 1
    d.tick()
    assert d.running and d.status().error is None
    assert [c["argv"] for c in commands(tmp_path)].count(["-d"]) == 1
