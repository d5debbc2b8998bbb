"""Metric families of the node's isolation backend and its MPS control daemon."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from vgpu import isolation_modes
from vgpu_nodeagent.isolation.hami_library import Library
from vgpu_nodeagent.isolation.mode import Live
from vgpu_nodeagent.isolation.mps import DaemonStatus


def _library(library: Library) -> Metric:
    family = GaugeMetricFamily(
        "vgpu_nodeagent_hami_core_library",
        "1 for the state of HAMi-core's library on the node: ok (checked, handed to "
        "containers), refused (see the log and /healthz), absent (none configured)",
        labels=["state", "source", "ref", "cuda"])
    state = "ok" if library.ok else "refused" if library.path else "absent"
    family.add_metric([state, library.source, library.ref or "",
                       "" if library.cuda is None else str(library.cuda)], 1)
    return family


def families(live: Live, configured: str, daemon: DaemonStatus | None,
             library: Library | None = None) -> Iterator[Metric]:
    mode = GaugeMetricFamily("vgpu_nodeagent_isolation_mode",
                             "1 for the isolation mode the node's GPUs run in now",
                             labels=["mode", "configured"])
    for name in isolation_modes.MODES:
        mode.add_metric([name, configured], 1 if live.mode == name else 0)
    yield mode
    enforced = GaugeMetricFamily("vgpu_nodeagent_isolation_enforced",
                                 "1 when something holds containers to their slices")
    enforced.add_metric([], 1 if live.enforced else 0)
    yield enforced
    degraded = GaugeMetricFamily("vgpu_nodeagent_isolation_degraded",
                                 "1 while the configured mode is not what runs (bad label, "
                                 "MPS daemon down, HAMi-core's library refused)")
    degraded.add_metric([], 0 if live.problem is None else 1)
    yield degraded
    if library is not None:
        yield _library(library)
    if daemon is None:
        return
    up = GaugeMetricFamily("vgpu_mps_daemon_up", "1 while the MPS control daemon answers")
    up.add_metric([], 1 if daemon.state == "running" else 0)
    yield up
    restarts = CounterMetricFamily("vgpu_mps_daemon_restarts",
                                   "Times the MPS control daemon died and was restarted")
    restarts.add_metric([], daemon.restarts)
    yield restarts
    starts = CounterMetricFamily("vgpu_mps_daemon_starts",
                                 "Times the agent launched the MPS control daemon")
    starts.add_metric([], daemon.starts)
    yield starts
