"""The usage watchdog: every few seconds, who uses how much of each GPU, against the grants.

NVML lists each GPU's running compute processes with their memory (host PIDs: the agent
runs with ``hostPID``); each PID's ``/proc/<pid>/cgroup`` names its pod and container
(:mod:`vgpu_nodeagent.isolation.cgroups`); the pods in the local watch give the grants. The
rules are in :mod:`vgpu_nodeagent.isolation.usage_rules`. A container above its grant gets
one ``GPUMemoryOverGrant`` Warning event (and a counter), and with
``isolation.watchdog.action: evict`` an eviction through the Eviction API, so
PodDisruptionBudgets hold. Processes that belong to no vgpu grant are logged once per PID
and counted per GPU. This works whatever the backend: it is how a HAMi-core that loaded
but does not enforce gets noticed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from vgpu import logs, loops, meta
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.config.isolation_section import WatchdogConfig
from vgpu.errors import ClusterError, CodecError, ConflictError, NotFoundError
from vgpu.pods import pod_key
from vgpu.usage import claimed
from vgpu_nodeagent import pod_actions
from vgpu_nodeagent.devices.discovery import Discovery
from vgpu_nodeagent.isolation import cgroups
from vgpu_nodeagent.isolation.usage_rules import Owner, Tally, Use, tally

_log = logs.get("vgpu.nodeagent.watchdog")

MIB = 1024 * 1024
REASON = "GPUMemoryOverGrant"


def owners_of(pids: Sequence[int], pods: Sequence[Obj],
              read: Callable[[int], str | None],
              schedulers: Collection[str]) -> dict[int, Owner | None]:
    """The container of each PID (None: not a pod's process), with its vgpu grants (none
    for a pod that no vgpu scheduler placed: whatever it uses is above its grant)."""
    by_uid: dict[str, tuple[str, dict[str, str], dict[str, dict[str, int]]]] = {}
    for pod in pods:
        uid = meta.uid(pod)
        try:
            assignment = claimed(pod, schedulers)
        except CodecError:
            assignment = None
        grants = {} if assignment is None else {
            name: {s.uuid: s.memory_mib for s in slices}
            for name, slices in assignment.containers.items()}
        by_uid[uid] = (pod_key(pod), cgroups.container_ids(pod), grants)
    out: dict[int, Owner | None] = {}
    for pid in pids:
        text = read(pid)
        ref = cgroups.parse(text) if text is not None else None
        known = by_uid.get(ref.pod_uid) if ref is not None else None
        if ref is None or known is None:
            out[pid] = None
            continue
        key, names, grants = known
        container = names.get(ref.container_id, ref.container_id[:12])
        out[pid] = Owner(key, container, grants.get(container, {}), ref.pod_uid)
    return out


class Watchdog:
    def __init__(self, config: WatchdogConfig, discovery: Discovery,
                 pods: Callable[[], Sequence[Obj]], port: ClusterPort | None, *,
                 schedulers: Collection[str], proc_root: str = "/proc") -> None:
        self._config = config
        self._schedulers = schedulers
        self._discovery = discovery
        self._pods = pods
        self._port = port
        self._proc = proc_root
        self._lock = threading.Lock()
        self.last = Tally((), (), ())
        self.breaches = 0
        self.evictions = 0
        self._reported: set[tuple[str, str, str]] = set()
        self._foreign_seen: set[int] = set()

    def _read(self, pid: int) -> str | None:
        try:
            with open(os.path.join(self._proc, str(pid), "cgroup"), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return None  # the process ended, or /proc is not the host's

    def check(self) -> Tally:
        """One round: tally, report new breaches (and evict), note foreign processes."""
        processes = {uuid: s.processes for uuid, s in self._discovery.samples().items()}
        pids = sorted({p.pid for procs in processes.values() for p in procs})
        pods = self._pods()
        owners = owners_of(pids, pods, self._read, self._schedulers)
        result = tally(processes, owners, self._config.slack_mib)
        for use in result.breaches:
            key = (use.pod, use.container, use.uuid)
            if key not in self._reported:
                self._reported.add(key)
                self._breach(use, pods)
        for item in result.foreign:
            if item.pid not in self._foreign_seen:
                self._foreign_seen.add(item.pid)
                _log.warning("a process outside any vgpu grant uses a GPU", uuid=item.uuid,
                             pid=item.pid, used_mib=item.used_mib, owner=item.owner)
        # Forget what is gone, so a container that breaches again is reported again.
        self._reported &= {(u.pod, u.container, u.uuid) for u in result.breaches}
        self._foreign_seen &= {f.pid for f in result.foreign}
        with self._lock:
            self.last = result
        return result

    def _breach(self, use: Use, pods: Sequence[Obj]) -> None:
        message = (f"container {use.container} uses {use.used_mib} MiB of GPU {use.uuid}, "
                   f"above its grant of {use.granted_mib} MiB")
        _log.warning("container above its GPU memory grant", pod=use.pod,
                     container=use.container, uuid=use.uuid, used_mib=use.used_mib,
                     granted_mib=use.granted_mib, action=self._config.action)
        with self._lock:
            self.breaches += 1
        pod_actions.warn(self._port, lambda: pods, use.pod, REASON, message, uid=use.uid)
        if self._config.action != "evict" or self._port is None:
            return
        namespace, name = use.pod.split("/", 1)
        try:
            # For this pod only: a successor of the name did not breach anything.
            self._port.evict(namespace, name, uid=use.uid)
        except (NotFoundError, ConflictError):
            _log.info("the pod that breached its grant is gone", pod=use.pod, uid=use.uid)
            return
        except ClusterError as exc:  # a PodDisruptionBudget said no, or the API failed
            _log.warning("could not evict the pod; next breach tries again", pod=use.pod,
                         error=str(exc))
            self._reported.discard((use.pod, use.container, use.uuid))
            return
        with self._lock:
            self.evictions += 1

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self._config.interval_seconds):
            loops.survive("watchdog", self.check)  # one bad round must not end the watch

    def families(self) -> Iterator[Metric]:
        with self._lock:
            last, breaches, evictions = self.last, self.breaches, self.evictions
        used = GaugeMetricFamily("vgpu_container_memory_used_bytes",
                                 "Device memory a container's processes use on a GPU (NVML)",
                                 labels=["namespace", "pod", "container", "uuid"])
        for u in last.uses:
            namespace, name = u.pod.split("/", 1)
            used.add_metric([namespace, name, u.container, u.uuid], u.used_mib * MIB)
        yield used
        foreign = GaugeMetricFamily("vgpu_gpu_foreign_memory_bytes",
                                    "Device memory of processes outside any vgpu grant",
                                    labels=["uuid"])
        totals: dict[str, int] = {}
        for f in last.foreign:
            totals[f.uuid] = totals.get(f.uuid, 0) + f.used_mib
        for uuid, mib in sorted(totals.items()):
            foreign.add_metric([uuid], mib * MIB)
        yield foreign
        count = CounterMetricFamily("vgpu_watchdog_breaches",
                                    "Containers found above their GPU memory grant")
        count.add_metric([], breaches)
        yield count
        evicted = CounterMetricFamily("vgpu_watchdog_evictions",
                                      "Pods evicted for using more GPU memory than granted")
        evicted.add_metric([], evictions)
        yield evicted
