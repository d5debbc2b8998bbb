"""The node agent's run-time settings that are not cluster configuration (the command's
flags and the tests' knobs)."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.serving import PLAIN, Serving

#: The plugin's socket in the kubelet's device-plugin folder.
ENDPOINT = "vgpu.sock"


@dataclass(frozen=True)
class Options:
    """Run-time settings that are not cluster configuration."""

    node_name: str
    #: None: no metrics server; 0: any free port (tests).
    metrics_port: int | None = None
    metrics_host: str = ""
    #: HTTPS with delegated authentication, or plain HTTP on the loopback address.
    metrics_serving: Serving = PLAIN
    endpoint: str = ENDPOINT
    poll_seconds: float = 0.1
    #: How long the informer's watch calls last before they are renewed.
    watch_timeout: float = 30.0
    #: Where the watchdog reads processes' cgroups by host PID: the host's /proc (the
    #: agent's own with hostPID, else the host's mounted read-only: ``--proc-root``).
    proc_root: str = "/proc"
