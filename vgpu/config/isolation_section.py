"""The ``isolation`` section: which backend holds containers to their slices (per node,
overridable by the node label ``vgpu.io/isolation``), the MPS control daemon the node agent
runs, and the usage watchdog."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import isolation_modes as modes
from vgpu.config.knobs import knob, section
from vgpu.errors import ConfigError

WATCHDOG_ACTIONS = ("report", "evict")


@dataclass(frozen=True)
class MpsConfig:
    control_command: str = knob(
        "nvidia-cuda-mps-control", "the MPS control program (a path, or a command line split "
        "like a shell's); the agent runs it with -d and sends it commands on stdin")
    pipe_dir: str = knob("/run/vgpu/mps/pipe",
                         "host folder of the daemon's pipes, mounted at the same path into "
                         "every container (CUDA_MPS_PIPE_DIRECTORY)")
    log_dir: str = knob("/run/vgpu/mps/log", "host folder of the daemon's control.log and "
                        "server.log (CUDA_MPS_LOG_DIRECTORY)")
    shm_dir: str = knob("", "host folder (a tmpfs) mounted at /dev/shm in the daemon's and "
                        "every client's view; empty = containers use the host IPC namespace "
                        "(hostIPC) or their own /dev/shm")
    max_clients: int = knob(modes.MPS_MAX_CLIENTS, "MPS clients per GPU (48 on Volta and "
                            "later); deviceSplitCount may not exceed it in mps mode",
                            lo=1, hi=1024)
    check_seconds: float = knob(5.0, "how often the daemon is asked whether it is alive",
                                lo=0.05, hi=600)
    restart_backoff_seconds: float = knob(1.0, "first wait before restarting a dead daemon; "
                                          "it doubles per failed start", lo=0.01, hi=600)
    restart_backoff_max_seconds: float = knob(60.0, "longest wait between restarts",
                                              lo=0.01, hi=3600)
    command_timeout_seconds: float = knob(10.0, "how long one control command may take",
                                          lo=0.1, hi=600)


@dataclass(frozen=True)
class WatchdogConfig:
    interval_seconds: float = knob(
        5.0, "how often NVML's per-process GPU memory is compared with each container's "
        "grant; 0 = off", lo=0, hi=3600)
    action: str = knob("report", "on a container above its grant: report (Warning event and "
                       "counter) or evict (through the Eviction API, so PodDisruptionBudgets "
                       "hold)", choices=WATCHDOG_ACTIONS)
    slack_mib: int = knob(0, "MiB a container may use above its grant before it is a breach "
                          "(CUDA's context itself takes a few hundred MiB)", lo=0)


@dataclass(frozen=True)
class IsolationConfig:
    mode: str = knob(modes.HAMI_CORE, "backend of nodes without a vgpu.io/isolation label",
                     choices=modes.MODES)
    # mps alone: on an H100 with CUDA 13, HAMi-core held memory but not compute (a GEMM at
    # gpucores 30 ran at 100 % of unlimited, small kernels at 81-83 %; docs/isolation.md).
    enforcing_modes: tuple[str, ...] = knob(
        (modes.MPS,), "modes the scheduler counts as enforcing for pods that require "
        "isolation (hami-core holds memory but was not seen to hold compute; add it to trust "
        "its memory limit alone)", choices=modes.MODES)
    require: bool = knob(False, "fractional pods without a vgpu.io/require-isolation "
                         "annotation require an enforcing node")
    mps: MpsConfig = section(MpsConfig, "the MPS control daemon (mode mps)")
    watchdog: WatchdogConfig = section(WatchdogConfig, "the node agent's usage watchdog")

    def __post_init__(self) -> None:
        if self.mps.restart_backoff_max_seconds < self.mps.restart_backoff_seconds:
            raise ConfigError("isolation.mps.restartBackoffMaxSeconds: below "
                              "restartBackoffSeconds")


def check_split(mode: str, split: int, mps: MpsConfig) -> str | None:
    """Why ``split`` tasks per GPU cannot run in ``mode`` (None: they can)."""
    if mode == modes.MPS and split > mps.max_clients:
        return (f"deviceSplitCount {split} is above the MPS client limit "
                f"(isolation.mps.maxClients {mps.max_clients}); lower deviceSplitCount or "
                f"use another isolation mode")
    return None
