"""The node agent: discovery, health, inventory, the device plugin and metrics, wired.

Threads, each bounded by one stop event: the pod informer (cluster only), the bind-phase
writer (cluster only), the socket watch (serve again / re-register after a kubelet
restart), the device loop (discovery changes and health, streamed to ListAndWatch), the
inventory publisher, the fault watch (NVML XID events), and the metrics server.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from vgpu import logs, loops, meta, served
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort, Obj, Selector
from vgpu.codecs import NodeInventory
from vgpu.config import Config
from vgpu.devices import Device
from vgpu.errors import ConfigError
from vgpu.pods import pod_key
from vgpu.topology.links import matrix
from vgpu_nodeagent import pod_actions
from vgpu_nodeagent.allocation import preferred, progress
from vgpu_nodeagent.allocation.allocator import Allocator
from vgpu_nodeagent.allocation.inflight import InFlight
from vgpu_nodeagent.allocation.phases import PhaseWriter
from vgpu_nodeagent.devices import inventory, virtual
from vgpu_nodeagent.devices.discovery import Discovery, GpuFacts
from vgpu_nodeagent.devices.health import HealthTracker
from vgpu_nodeagent.devices.xid import is_device_fault
from vgpu_nodeagent.isolation import grants, hami_library, host_dirs
from vgpu_nodeagent.isolation import metrics as isolation_metrics
from vgpu_nodeagent.isolation.mode import Backend, node_label
from vgpu_nodeagent.isolation.mps_faults import MpsFaults
from vgpu_nodeagent.isolation.watchdog import Watchdog
from vgpu_nodeagent.kubelet.device_plugin import DeviceList, DevicePluginService
from vgpu_nodeagent.kubelet.plugin_server import PluginServer
from vgpu_nodeagent.kubelet.podresources import (
    Intruder,
    KubeletView,
    Mismatch,
    PodResourcesClient,
    PodResourcesWatch,
)
from vgpu_nodeagent.metrics import Metrics, MetricsServer, Sources
from vgpu_nodeagent.options import Options

_log = logs.get("vgpu.nodeagent")

#: How long after a GetPreferredAllocation or Allocate call the kubelet's pod resources
#: are not read (a kubelet may admit the next container of the pod at once).
ADMISSION_QUIET_SECONDS = 2.0

#: The Warning event on a pod that holds our devices without vgpu's placement.
INTRUDER_REASON = "GPUNotPlacedByVgpu"
#: The Warning event on a pod whose Allocate was refused for the same reason.
REFUSED_REASON = "AllocateRefused"
#: The Warning event on a pod whose grant would take a GPU past what it has.
OVERCOMMIT_REASON = "GPUOvercommitRefused"
#: The Warning event on a pod whose assignment annotation was edited after it was served.
EDITED_REASON = "AssignmentEdited"


class NodeAgent:
    def __init__(self, config: Config, discovery: Discovery, port: ClusterPort | None,
                 options: Options, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.options = options
        self.discovery = discovery
        self.port = port
        self.node = options.node_name
        self.split = config.device_split_count
        self.resource_name = config.nodeagent.resource_name or config.resource_names.gpu
        self.health = HealthTracker(config.nodeagent.health_quiet_seconds, clock)
        self.devices = DeviceList()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._inventory_due = threading.Event()
        self._threads: list[threading.Thread] = []
        self._last_tick = time.monotonic()
        self._facts: tuple[GpuFacts, ...] = ()
        self._unhealthy: frozenset[str] = frozenset()
        self._lock = threading.Lock()

        self.inflight: InFlight | None = None
        self.informer: Informer | None = None
        self.phases: PhaseWriter | None = None
        if port is not None:
            self.inflight = InFlight(progress.ProgressFile(
                progress.path_in(config.nodeagent.device_plugin_dir)), node=self.node,
                resource=self.resource_name, schedulers=config.vgpu_schedulers)
            self.informer = Informer(port, "pods", self._on_pod,
                                     Selector(node_name=self.node),
                                     watch_timeout=options.watch_timeout)
            self.phases = PhaseWriter(port)
        self.publisher = inventory.InventoryPublisher(port, self.node,
                                                      config.nodeagent.heartbeat_seconds)
        self.pod_resources: PodResourcesWatch | None = None
        if port is not None and config.nodeagent.pod_resources_socket:
            self.pod_resources = PodResourcesWatch(
                PodResourcesClient(config.nodeagent.pod_resources_socket), self.resource_name,
                self._known_uuids, self._pods, schedulers=config.vgpu_schedulers,
                report=self._report_mismatch, intruder=self._report_intruder,
                quiet=self._admission_quiet)
        # Nothing is handed to containers before start() has installed and checked it.
        self.backend = Backend(config, library=hami_library.Library(
            config.nodeagent.hami_core_path, False, "not checked yet")
            if config.nodeagent.hami_core_path else hami_library.NOT_CONFIGURED)
        self.watchdog = Watchdog(config.isolation.watchdog, discovery, self._pods, port,
                                 schedulers=config.vgpu_schedulers,
                                 proc_root=options.proc_root)
        self._mode = ""
        #: Faults reported to the pods they hit; made with the MPS daemon, when the node's
        #: mode needs one (:meth:`_configure_isolation`).
        self.mps_faults: MpsFaults | None = None
        self.metrics = Metrics(Sources(gpus=self._gpu_health, samples=discovery.samples,
                                       pods=self._pods, registered=self._registered,
                                       schedulers=config.vgpu_schedulers,
                                       kubelet=self._kubelet_view, extra=self._extra_metrics))
        self.allocator = Allocator(config, self.node, self.inflight, self.phases,
                                   self._known_uuids,
                                   wait_seconds=config.nodeagent.allocate_wait_seconds,
                                   on_complete=self.metrics.observe_bind_to_allocate,
                                   backend=self.backend, totals=self._totals,
                                   links=self._links, on_refused=self._refused,
                                   devices=self._devices, on_overcommit=self._overcommit)
        self._edits_reported: set[str] = set()
        self.service = DevicePluginService(self.devices, self.allocator, self._stop,
                                           observe=self.metrics.observe_allocate)
        self.server = PluginServer(self.service, config.nodeagent.device_plugin_dir,
                                   options.endpoint, self.resource_name)
        self.metrics_server: MetricsServer | None = None
        #: HAMi-core's host folders (its lock folder, each container's cache folder).
        self.cache_folders = host_dirs.CacheFolders(config.nodeagent.shared_cache_dir) \
            if config.nodeagent.hami_core_path else None

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        self.allocator.on_pod(old, new)
        if new is not None:
            self._check_edit(new)
        elif self.cache_folders is not None:
            self.cache_folders.on_pod(old, new)

    def _check_edit(self, pod: Obj) -> None:
        """Say so, once per pod, when its assignment annotation no longer is what this node
        served it: the served record stays what counts (:mod:`vgpu.served`)."""
        why = served.edited(pod)
        uid = meta.uid(pod)
        if why is None or uid in self._edits_reported:
            return
        self._edits_reported.add(uid)
        self.metrics.assignment_edited.inc()
        _log.warning("a served pod's assignment annotation was edited; ignored",
                     pod=pod_key(pod), reason=why)
        threading.Thread(target=pod_actions.warn, name="edited-event", daemon=True,
                         args=(self.port, self._pods, pod_key(pod), EDITED_REASON,
                               f"{why}: vgpu counts what was served, recorded in the pod's "
                               f"{served.CONDITION} condition, and ignores the annotation"),
                         kwargs={"uid": uid}).start()

    # -- views -----------------------------------------------------------------------------

    def _known_uuids(self) -> frozenset[str]:
        with self._lock:
            return frozenset(f.uuid for f in self._facts)

    def _pci(self) -> dict[str, str]:
        with self._lock:
            return {f.uuid: f.pci for f in self._facts if f.pci}

    def _totals(self) -> dict[str, int]:
        with self._lock:
            return {f.uuid: f.memory_mib for f in self._facts}

    def _extra_metrics(self) -> Iterator[Metric]:
        daemon = self.backend.daemon
        yield from isolation_metrics.families(self.backend.current(), self.backend.choice.mode,
                                              daemon.status() if daemon else None,
                                              self.backend.library)
        yield from self.watchdog.families()
        if self.mps_faults is not None:
            yield from self.mps_faults.families()

    def _gpu_health(self) -> list[tuple[GpuFacts, bool]]:
        with self._lock:
            return [(f, virtual.is_healthy(f, self._unhealthy)) for f in self._facts]

    def _pods(self) -> list[Obj]:
        return self.informer.items() if self.informer is not None else []

    def _registered(self) -> bool:
        return self.server.registered.is_set()

    def _admission_quiet(self) -> bool:
        """No pod of ours in allocation and no admission call lately (kubelet/podresources.py:
        a pod-resources read during an admission can crash a kubelet)."""
        recent = time.monotonic() - self.service.last_admission < ADMISSION_QUIET_SECONDS
        return not recent and not (self.inflight is not None and self.inflight.current())

    def _kubelet_view(self) -> KubeletView | None:
        return self.pod_resources.view if self.pod_resources is not None else None

    def _report_mismatch(self, mismatch: Mismatch) -> None:
        key = f"{mismatch.namespace}/{mismatch.pod}"
        _log.warning("a container's GPUs in the kubelet differ from its assignment",
                     pod=key, container=mismatch.container, kubelet=list(mismatch.kubelet),
                     assigned=list(mismatch.assigned))
        pod_actions.warn(self.port, self._pods, key, "GPUAssignmentMismatch", mismatch.message)

    def _links(self) -> preferred.Links | None:
        links = self.discovery.links()
        if links is None:
            return None
        with self._lock:
            uuids = tuple(f.uuid for f in sorted(self._facts, key=lambda f: f.index))
        return preferred.Links(uuids, matrix(uuids, links), self.split)

    def _devices(self) -> dict[str, Device]:
        return {d.uuid: d for d in self.inventory().devices}

    def _overcommit(self, pod: Obj, reason: str) -> None:
        """A grant was refused for lack of room on a GPU: count it and say so on the pod."""
        self.metrics.overcommit_refused.inc()
        threading.Thread(target=pod_actions.warn, name="overcommit-event", daemon=True,
                         args=(self.port, self._pods, pod_key(pod), OVERCOMMIT_REASON, reason),
                         kwargs={"uid": meta.uid(pod)}).start()

    def _refused(self, pod: Obj, reason: str) -> None:
        """An Allocate was refused for ``pod``: count it and say so on the pod, off the
        kubelet's call (the allocator holds its lock while this runs)."""
        self.metrics.refused.inc()
        key = pod_key(pod)
        threading.Thread(target=pod_actions.warn, name="refused-event", daemon=True,
                         args=(self.port, self._pods, key, REFUSED_REASON, reason)).start()

    def _report_intruder(self, intruder: Intruder) -> None:
        evict = self.config.nodeagent.evict_intruders
        _log.warning("a pod no vgpu scheduler placed holds this node's vGPU devices",
                     pod=intruder.key, containers=[c for c, _ in intruder.containers],
                     evict=evict)
        pod_actions.warn(self.port, self._pods, intruder.key, INTRUDER_REASON, intruder.message,
                         uid=intruder.uid)
        if evict and self.port is not None:
            pod_actions.evict(self.port, intruder.key, intruder.uid)

    def inventory(self) -> NodeInventory:
        mode = self.backend.current().mode
        with self._lock:
            made = inventory.inventory(self._facts, self._unhealthy, self.split, mode,
                                       self.discovery.links())
        return dataclasses.replace(made, isolation=self.backend.node_isolation())

    def healthz(self) -> tuple[bool, str]:
        stalled = time.monotonic() - self._last_tick > 10 * max(self.options.poll_seconds, 0.5)
        registered = "registered" if self._registered() else "not registered"
        live = self.backend.current()
        # A degraded isolation is reported, not fatal: the agent keeps serving pods.
        mode = f"isolation {live.mode}" + (f" ({live.problem})" if live.problem else "")
        if stalled:
            return False, f"device loop stalled; {registered} with the kubelet; {mode}"
        ended = loops.dead(self._threads) if not self._stop.is_set() else []
        if ended:
            return False, f"loops ended: {', '.join(ended)}; {registered} with the kubelet"
        return True, f"ok; {registered} with the kubelet; {mode}"

    # -- lifecycle -------------------------------------------------------------------------

    def _check_environment(self) -> None:
        """What the node must provide before the agent serves: the kubelet's device-plugin
        folder."""
        folder = self.config.nodeagent.device_plugin_dir
        if not os.path.isdir(folder):
            raise ConfigError(f"device-plugin folder {folder} does not exist: mount the "
                              "kubelet's /var/lib/kubelet/device-plugins into the agent or "
                              "pass --device-plugin-dir")

    def _install_library(self) -> None:
        """HAMi-core installed from the image and checked, and its preload list written,
        before any container can be answered; a refusal degrades the node, it does not stop
        the agent (:mod:`vgpu_nodeagent.isolation.hami_library`)."""
        library = hami_library.install(self.config, self.discovery.cuda_driver_version())
        if library.ok:
            preload = grants.preload_host_path(self.config)
            try:
                os.makedirs(os.path.dirname(preload), exist_ok=True)
                with open(preload, "w", encoding="ascii") as handle:
                    handle.write(grants.preload_content())
            except OSError as exc:
                library = dataclasses.replace(library, ok=False, detail=(
                    f"HAMi-core library {library.path} refused: cannot write {preload}: "
                    f"{exc.strerror}"))
        if library.ok and self.cache_folders is not None:
            try:
                self.cache_folders.prepare()
            except OSError as exc:
                library = dataclasses.replace(library, ok=False, detail=(
                    f"HAMi-core library {library.path} refused: cannot make its lock folder "
                    f"under {self.cache_folders.shared}: {exc.strerror or exc}"))
        if library.ok:
            _log.info("HAMi-core library checked", path=library.path, detail=library.detail)
        elif library.path:
            _log.error("HAMi-core library refused: containers get none", path=library.path,
                       error=library.detail)
        self.backend.use_library(library)

    def _configure_isolation(self) -> None:
        """The node's mode from its ``vgpu.io/isolation`` label, read once at start."""
        choice = self.backend.configure(node_label(self.port, self.node),
                                        self.discovery.devices())
        if self.backend.auto is not None:
            _log.info("isolation mode chosen by auto", mode=choice.mode, why=self.backend.auto)
        if choice.error is not None:
            _log.error("isolation mode not applied", error=choice.error, mode=choice.mode)
        daemon = self.backend.daemon
        if daemon is not None:
            daemon.tick()
            self._spawn("mps-daemon", lambda: daemon.run(self._stop))
            faults = self.mps_faults = MpsFaults(
                self.config.isolation.mps, daemon, self._pods, self.port,
                schedulers=self.config.vgpu_schedulers, proc_root=self.options.proc_root,
                pci=self._pci)
            self._spawn("mps-faults", lambda: faults.run(self._stop))

    def _sweep_cache_folders(self) -> None:
        informer, folders = self.informer, self.cache_folders
        assert informer is not None and folders is not None
        if informer.synced.wait(600) and not self._stop.is_set():
            folders.sweep({meta.uid(p) for p in informer.items()})

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = loops.thread(name, target)
        thread.start()
        self._threads.append(thread)

    def start(self) -> None:
        """Serve, register and start every loop; returns once serving."""
        self._check_environment()
        self._install_library()
        self._configure_isolation()
        self._update_devices()
        if self.informer is not None:
            self._threads.append(self.informer.start(self._stop, "pod-informer"))
            if self.cache_folders is not None:
                # Once: the folders of pods that went while no agent watched.
                threading.Thread(target=self._sweep_cache_folders, daemon=True,
                                 name="cache-sweep").start()
        if self.phases is not None:
            phases = self.phases
            self._spawn("bind-phase-writer", lambda: phases.run(self._stop))
        self.server.serve()
        self.server.register()
        self._spawn("socket-watch",
                    lambda: self.server.run(self._stop, self.options.poll_seconds))
        self._spawn("device-loop", self._device_loop)
        self._spawn("inventory", self._inventory_loop)
        self._spawn("fault-watch",
                    lambda: self.discovery.watch_faults(self._on_fault, self._stop))
        if self.config.isolation.watchdog.interval_seconds > 0:
            self._spawn("watchdog", lambda: self.watchdog.run(self._stop))
        if self.pod_resources is not None:
            watch, every = self.pod_resources, self.config.nodeagent.pod_resources_seconds
            self._spawn("pod-resources", lambda: watch.run(self._stop, every))
        if self.options.metrics_port is not None:
            self.metrics_server = MetricsServer(self.metrics.registry, self.healthz,
                                                self.options.metrics_port,
                                                self.options.metrics_host,
                                                serving=self.options.metrics_serving)
            self.metrics_server.start()
        _log.info("node agent started", node=self.node, resource=self.resource_name,
                  discovery=self.discovery.name, gpus=len(self._facts), split=self.split,
                  socket=self.server.socket_path, cluster=self.port is not None,
                  isolation=self.backend.current().mode)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._inventory_due.set()
        # Before the plugin goes: from here on the kubelet would refuse a GPU pod.
        self.publisher.withdraw()
        self.server.stop()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.discovery.close()
        _log.info("node agent stopped", node=self.node)

    # -- loops -----------------------------------------------------------------------------

    def _on_fault(self, uuid: str | None, xid: int) -> None:
        if self.mps_faults is not None:
            # Any XID, an application's too: it ends every client of the GPU's MPS server.
            self.mps_faults.xid(uuid, xid)
        if not is_device_fault(xid):
            return  # the application's error: the GPU stays healthy
        uuids = [uuid] if uuid is not None else list(self._known_uuids())
        self.health.fault(uuids)
        self._wake.set()

    def _update_devices(self) -> bool:
        facts = virtual.usable(self.discovery.devices())
        unhealthy = self.health.unhealthy()
        with self._lock:
            before = {f.uuid: virtual.is_healthy(f, self._unhealthy) for f in self._facts}
            self._facts, self._unhealthy = facts, unhealthy
        for f in facts:
            now = virtual.is_healthy(f, unhealthy)
            if f.uuid in before and before[f.uuid] != now:
                _log.warning("GPU health changed", uuid=f.uuid,
                             health=virtual.HEALTHY if now else virtual.UNHEALTHY)
        changed = self.devices.set(virtual.plugin_devices(facts, unhealthy, self.split))
        mode = self.backend.current().mode
        if mode != self._mode:
            if self._mode:
                _log.warning("isolation mode changed", before=self._mode, now=mode)
            self._mode = mode
            self._inventory_due.set()
        if changed:
            self._inventory_due.set()
        return changed

    def _device_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.options.poll_seconds)
            self._wake.clear()
            self._last_tick = time.monotonic()
            # One bad round must not end health tracking.
            loops.survive("device-loop", lambda: (self.discovery.refresh(),
                                                  self._update_devices()))

    def _inventory_loop(self) -> None:
        tick = min(1.0, self.config.nodeagent.heartbeat_seconds)
        while not self._stop.is_set():
            self._inventory_due.wait(tick)
            self._inventory_due.clear()
            if self._stop.is_set():
                return
            loops.survive("inventory", lambda: self.publisher.publish_due(self.inventory()))
