"""The ``isolation`` section: which backend holds containers to their slices (per node,
overridable by the node label ``vgpu.io/isolation``), the MPS control daemon the node agent
runs and the faults it reports, the usage watchdog, and whom pods share a fault domain with
by default."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from vgpu import fault_domains, mps_users
from vgpu import isolation_modes as modes
from vgpu.config.knobs import knob, section
from vgpu.errors import ConfigError, RequestError

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
    roster_seconds: float = knob(
        2.0, "how often the agent reads the daemon's servers and their clients, so that a "
        "fault can be reported to the pods whose clients it ended (they are gone by then); "
        "0 = off (faults are then reported only to clients still connected)", lo=0, hi=600)
    fault_window_seconds: float = knob(
        10.0, "GPU events within this many seconds of a reported fault on the same GPU are "
        "the same fault (one GPU fault raises several XIDs)", lo=0, hi=3600)
    kernel_log: str = knob(
        "/dev/kmsg", "the kernel log the agent reads the driver's Xid lines from, which name "
        "the process that faulted (NVML's events do not); empty = off. Reading /dev/kmsg "
        "needs CAP_SYSLOG or kernel.dmesg_restrict=0")
    place_by_user: bool = knob(
        True, "the scheduler puts only pods of one Linux user (their runAsUser) on a GPU in "
        "mps or mps-hami-core, as one MPS daemon serves one uid at a time; false turns the "
        "rule off (pods of two uids on one MPS GPU then stall each other), and auto then "
        "never chooses an MPS mode")
    namespace_users: tuple[str, ...] = knob(
        (), "<namespace>=<uid> entries: the webhook runs the GPU containers of that "
        "namespace's pods as that uid (runAsUser, set where the pod states none) and refuses "
        "a pod whose GPU containers state another, so the namespace's pods share MPS GPUs")

    def __post_init__(self) -> None:
        try:
            mps_users.parse_namespace_users(self.namespace_users)
        except RequestError as exc:
            raise ConfigError(f"isolation.mps.namespaceUsers: {exc}") from None

    @functools.cached_property
    def users(self) -> dict[str, int]:
        return mps_users.parse_namespace_users(self.namespace_users)


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
class FaultDomainsConfig:
    default: str = knob(fault_domains.ANY, "whom a pod without a vgpu.io/fault-domain "
                        "annotation may share a fault domain (an MPS or unisolated GPU) "
                        "with, outside the namespaces namespaceDefaults names: any, or only "
                        "pods of its namespace", choices=fault_domains.SCOPES)
    namespace_defaults: tuple[str, ...] = knob(
        (), "<namespace>=<any|namespace> entries: that namespace's default instead")

    def __post_init__(self) -> None:
        try:
            fault_domains.parse_namespace_defaults(self.namespace_defaults)
        except RequestError as exc:
            raise ConfigError(f"isolation.faultDomains.namespaceDefaults: {exc}") from None

    @functools.cached_property
    def defaults(self) -> fault_domains.Defaults:
        return fault_domains.Defaults(
            self.default, fault_domains.parse_namespace_defaults(self.namespace_defaults))


@dataclass(frozen=True)
class IsolationConfig:
    mode: str = knob(modes.HAMI_CORE, "backend of nodes without a vgpu.io/isolation label; "
                     "auto = per node, the strongest its install supports (mps-hami-core, "
                     "mps, hami-core, none)", choices=modes.CONFIGURABLE)
    # The MPS modes alone: on an H100 with CUDA 13, HAMi-core held memory but not compute
    # (a GEMM at gpucores 30 ran at 100 % of unlimited, small kernels at 81-83 %;
    # docs/isolation.md). mps-hami-core holds by the same MPS limits.
    enforcing_modes: tuple[str, ...] = knob(
        (modes.MPS, modes.MPS_HAMI_CORE), "modes the scheduler counts as enforcing for pods "
        "that require isolation (hami-core holds memory but was not seen to hold compute; "
        "add it to trust its memory limit alone)", choices=modes.MODES)
    require: bool = knob(False, "fractional pods without a vgpu.io/require-isolation "
                         "annotation require an enforcing node")
    mps: MpsConfig = section(MpsConfig, "the MPS control daemon (modes mps and "
                             "mps-hami-core) and the faults it reports")
    watchdog: WatchdogConfig = section(WatchdogConfig, "the node agent's usage watchdog")
    fault_domains: FaultDomainsConfig = section(
        FaultDomainsConfig, "whom pods share a fault domain with when they do not say")

    def __post_init__(self) -> None:
        if self.mps.restart_backoff_max_seconds < self.mps.restart_backoff_seconds:
            raise ConfigError("isolation.mps.restartBackoffMaxSeconds: below "
                              "restartBackoffSeconds")


def check_split(mode: str, split: int, mps: MpsConfig) -> str | None:
    """Why ``split`` tasks per GPU cannot run in ``mode`` (None: they can)."""
    if modes.uses_mps(mode) and split > mps.max_clients:
        return (f"deviceSplitCount {split} is above the MPS client limit "
                f"(isolation.mps.maxClients {mps.max_clients}); lower deviceSplitCount or "
                f"use another isolation mode")
    return None
