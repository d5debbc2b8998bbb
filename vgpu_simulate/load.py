"""``--load L``: the trace's arrivals compressed until the whole cluster is offered L times
its GPUs.

A pod list is a sample: openb's pods, placed as they come, never hold more than 1 % of its
cluster's GPUs, and all of them at once ask for less than the cluster has (0.98 of it for
``default``, 0.64 for ``gpushare100``). So no compression of one pass over the list can
offer the whole cluster its GPUs, and the replay *laps* the list: the compressed trace is
played again and again, each lap starting where the last ended, until the window closes.

* **Compression.** Each pod keeps its duration (``deletion_time - creation_time``); its
  creation time, counted from the list's opening, is divided by the compression ``c``. The
  list opens at the creation time of its 1st percentile pod: the few pods created before
  (27 of openb's 8,152, up to 115 days earlier, pods that had been running for weeks when
  its 34 days began) arrive when it opens, rather than spreading a trickle over most of
  each lap.
* **Laps.** A lap lasts the compressed span of the list plus one mean gap between
  arrivals. Lap ``k`` is turned by a seeded offset (its pods keep their order and gaps,
  starting at a seeded point of the list and wrapping around), so seeds differ in which
  parts of the trace meet, not in which nodes exist.
* **Load.** The offered GPU demand at time ``t`` is the GPUs of the pods that arrived by
  ``t`` and would still run, had none waited. Its mean over the window ``[0, H)``, over
  the cluster's GPUs, is the offered load; ``c`` is found by bisection so that it is
  ``L`` (it grows with ``c``). Pods arriving after the window are not replayed; the pods
  of the window are followed until they leave.

The achieved load is the same mean of the GPUs allocated (:func:`achieved`): below the
offered load by what waited.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu.errors import ConfigError
from vgpu_simulate.trace import MILLI, TraceError, TracePod

#: The window's length when none is given: 30 minutes of replayed time.
DEFAULT_WINDOW = 1800.0
#: Pods before the list's opening: this percentile of the creation times.
OPENING_PERCENTILE = 1
#: A replay larger than this is refused (a load or window far past any use).
MAX_PODS = 2_000_000
_ITERATIONS = 80

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Load:
    """How a pod list was turned into the replay's stream."""

    target: float
    window: float
    compression: float
    laps: int  # begun within the window
    pods: int
    #: The mean offered GPU demand over the window, over the cluster's GPUs (≈ target).
    offered: float
    #: Its highest value, over the cluster's GPUs: the demand rises through the window,
    #: as pods longer than it pile up.
    offered_peak: float

    def to_json(self) -> dict[str, object]:
        return {"target": self.target, "window": self.window,
                "compression": round(self.compression, 3), "laps": self.laps,
                "pods": self.pods, "offered": round(self.offered, 4),
                "offered_peak": round(self.offered_peak, 4)}


def check(load: float, window: float) -> None:
    if not (load > 0 and math.isfinite(load)):
        raise ConfigError(f"--load {load}: must be a positive number (1 offers the cluster "
                          "its GPUs)")
    if not (window > 0 and math.isfinite(window)):
        raise ConfigError(f"--window {window}: must be a positive number of seconds")


@dataclass(frozen=True)
class _List:
    """The pod list as laps are made of it: each pod's place in a lap (0 to 1), duration
    and GPUs, in creation order."""

    pods: Sequence[TracePod]
    place: Floats
    duration: Floats
    gpus: Floats
    span: float  # seconds of the trace one lap stands for


def _prepare(pods: Sequence[TracePod]) -> _List:
    if not pods:
        raise TraceError("--load: the pod list is empty")
    missing = [p.name for p in pods if p.creation_time is None]
    if missing:
        raise TraceError(f"--load needs each pod's creation_time; {len(missing)} pod(s) have "
                         f"none (first: {missing[0]})")
    order = sorted(pods, key=lambda p: (p.creation_time or 0, p.name.encode()))
    end = max(max(p.deletion_time or 0, p.creation_time or 0) for p in order)
    born = np.asarray([p.creation_time or 0 for p in order], dtype=np.float64)
    gone = np.asarray([end if p.deletion_time is None else max(p.deletion_time,
                                                               p.creation_time or 0)
                       for p in order], dtype=np.float64)
    opening = born[len(born) * OPENING_PERCENTILE // 100]
    offset = np.maximum(born - opening, 0.0)
    last = float(offset[-1])
    if last <= 0:
        raise TraceError("--load: every pod of the list is created at the same time; "
                         "there are no arrival times to compress")
    span = last + last / len(order)
    return _List(order, offset / span, gone - born,
                 np.asarray([p.total_gpu_milli / MILLI for p in order]), span)


class _Turns:
    """Each lap's seeded turn (0 to 1), drawn as far as laps are asked for."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"load:{seed}")
        self._turns: list[float] = []

    def __getitem__(self, lap: int) -> float:
        while len(self._turns) <= lap:
            self._turns.append(self._rng.random())
        return self._turns[lap]


def _laps(trace: _List, turns: _Turns, compression: float, window: float
          ) -> list[tuple[int, Floats]]:
    """Per lap begun within the window: its pods' arrival times."""
    period = trace.span / compression
    out = []
    for lap in range(math.ceil(window / period)):
        out.append((lap, period * (lap + np.mod(trace.place + turns[lap], 1.0))))
    return out


def _offered(trace: _List, turns: _Turns, compression: float, window: float,
             gpus: int) -> float:
    total = 0.0
    for _, at in _laps(trace, turns, compression, window):
        inside = at < window
        total += float((trace.gpus[inside]
                        * np.minimum(trace.duration[inside], window - at[inside])).sum())
    return total / window / gpus


def stream(pods: Sequence[TracePod], gpus: int, *, load: float, window: float,
           seed: int) -> tuple[list[TracePod], Load]:
    """The pods of the replay (each lap's named ``<name>.l<lap>``) and how they were made."""
    check(load, window)
    if gpus <= 0:
        raise TraceError("--load: the cluster has no GPUs to offer demand to")
    trace = _prepare(pods)
    turns = _Turns(seed)
    lo, hi = 1e-9, 1.0
    while _offered(trace, turns, hi, window, gpus) < load:
        lo, hi = hi, hi * 4
        if len(trace.pods) * window * hi / trace.span > MAX_PODS:
            raise ConfigError(f"--load {load} --window {window:g}: over {MAX_PODS:,} pods "
                              "would be replayed; lower the load or the window")
    for _ in range(_ITERATIONS):
        mid = math.sqrt(lo * hi)
        if _offered(trace, turns, mid, window, gpus) < load:
            lo = mid
        else:
            hi = mid
    out: list[TracePod] = []
    laps = _laps(trace, turns, hi, window)
    for lap, at in laps:
        for pod, start, duration in zip(trace.pods, at.tolist(), trace.duration.tolist(),
                                        strict=True):
            if start < window:
                out.append(dataclasses.replace(pod, name=f"{pod.name}.l{lap}",
                                               creation_time=start,
                                               deletion_time=start + duration))
    offered = _offered(trace, turns, hi, window, gpus)
    return out, Load(target=load, window=window, compression=hi, laps=len(laps),
                     pods=len(out), offered=offered,
                     offered_peak=peak(out, window) / gpus)


def peak(pods: Sequence[TracePod], window: float) -> float:
    """The most GPUs the pods would hold at once within the window, had none waited."""
    changes: list[tuple[float, float]] = []
    for p in pods:
        born = p.creation_time or 0.0
        if p.num_gpu and born < window:
            changes.append((born, p.total_gpu_milli / MILLI))
            changes.append((p.deletion_time if p.deletion_time is not None else math.inf,
                            -p.total_gpu_milli / MILLI))
    changes.sort(key=lambda c: (c[0], c[1]))  # a pod leaving before one arrives
    held = best = 0.0
    for at, change in changes:
        if at >= window:
            break
        held += change
        best = max(best, held)
    return best


def achieved(timeline: Sequence[tuple[float, float, float]], window: float,
             gpus: int) -> float:
    """The mean allocated GPUs over ``[0, window)``, over the cluster's GPUs, from a churn
    ledger's timeline (``(seconds, allocated GPUs, pending GPUs)`` from each change on)."""
    total = 0.0
    for i, (start, allocated, _) in enumerate(timeline):
        end = timeline[i + 1][0] if i + 1 < len(timeline) else window
        span = min(end, window) - max(start, 0.0)
        if span > 0:
            total += span * allocated
    return total / window / gpus if gpus and window > 0 else 0.0
