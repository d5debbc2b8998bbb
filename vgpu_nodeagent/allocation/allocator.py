"""Allocate and GetPreferredAllocation, without the gRPC around them.

Allocate checks the device IDs, claims the pod and containers the request is for from the
in-flight index (:meth:`~vgpu_nodeagent.allocation.inflight.InFlight.claim`: by the GPUs
its device IDs name, else by device count on the oldest pod), answers each container's
grant from the pod's assignment, and reports. When every GPU container of the pod is
allocated, the pod's ``bind-phase`` becomes ``success``; when the pod cannot be served (bad
assignment, a count no container has), ``failed`` with a reason, so the scheduler's gate
for the node opens instead of waiting for its timeout.

An Allocate that is the own of a pod vgpu did not place is refused, ``PERMISSION_DENIED``
(:class:`~vgpu_nodeagent.allocation.errors.Refused`), not served a pod in allocation's
grant: that pod's comes next. A grant that would take a GPU past what it has, counting what
this agent served (:mod:`~vgpu_nodeagent.allocation.ledger`), is refused too,
``RESOURCE_EXHAUSTED``, and its pod fails: the node is the last check. The pod's final
phase carries the served record (:mod:`vgpu.served`) that every reader trusts over the
annotation its owner could edit.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Collection, Mapping, Sequence

from vgpu import isolation_modes, logs, meta
from vgpu.annotations import PHASE_FAILED, PHASE_SUCCESS
from vgpu.cluster.port import Obj
from vgpu.codecs import bind_time
from vgpu.config import Config
from vgpu.devices import Device
from vgpu.pod_history import ALLOCATION, Allocation, encode_allocation
from vgpu.pods import pod_key
from vgpu.served import condition as served_condition
from vgpu_nodeagent.allocation import preferred
from vgpu_nodeagent.allocation.errors import (
    AllocateError,
    Code,
    Overcommitted,
    Refused,
    Unservable,
)
from vgpu_nodeagent.allocation.inflight import InFlight
from vgpu_nodeagent.allocation.inflight_pod import Claim, InFlightPod
from vgpu_nodeagent.allocation.ledger import Ledger
from vgpu_nodeagent.allocation.phases import PhaseUpdate, PhaseWriter
from vgpu_nodeagent.devices.virtual import physical_uuid
from vgpu_nodeagent.isolation import answers, grants, host_dirs
from vgpu_nodeagent.isolation.mode import Backend, Live

_log = logs.get("vgpu.nodeagent.allocate")


class Allocator:
    def __init__(self, config: Config, node: str, inflight: InFlight | None,
                 phases: PhaseWriter | None, known_gpus: Callable[[], Collection[str]],
                 *, wait_seconds: float = 5.0, prepare_host_dirs: bool = True,
                 on_complete: Callable[[float], None] | None = None,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
                 backend: Backend | None = None,
                 totals: Callable[[], Mapping[str, int]] = dict,
                 links: Callable[[], preferred.Links | None] = lambda: None,
                 on_refused: Callable[[Obj, str], None] | None = None,
                 devices: Callable[[], Mapping[str, Device]] = dict,
                 on_overcommit: Callable[[Obj, str], None] | None = None) -> None:
        self._config = config
        self._on_refused = on_refused  # told each refused pod and why (an event, a metric)
        # The node's GPUs as it publishes them, what the ledger measures grants against.
        self._devices = devices
        self._on_overcommit = on_overcommit  # told each pod failed for lack of room
        self.ledger = Ledger(config)
        self.backend = backend if backend is not None else Backend(config)
        # MiB of each GPU, so that a whole-GPU grant gets no MPS memory pin.
        self._totals = totals
        # What the last answered containers got, for the record of the pod they complete.
        self._given: Live | None = None
        self._node = node
        self._inflight = inflight
        self._phases = phases
        self._known_gpus = known_gpus
        # The node's GPU links, for GetPreferredAllocation when no assignment steers it.
        self._links = links
        self._wait = wait_seconds
        self._folders = host_dirs.CacheFolders(config.nodeagent.shared_cache_dir) \
            if prepare_host_dirs else None
        # Told the bind-to-Allocate seconds of each pod this agent completes (a metric).
        self._on_complete = on_complete
        self._now = now
        # The kubelet calls one at a time; the lock keeps "claim, then mark served" atomic
        # should it ever not.
        self._lock = threading.Lock()

    # -- helpers ---------------------------------------------------------------------------

    def _index(self) -> InFlight:
        if self._inflight is None:
            raise AllocateError(
                Code.FAILED_PRECONDITION,
                "this node agent runs without a cluster (--no-cluster), so it cannot tell "
                "which pod a device request is for; run it with cluster access")
        return self._inflight

    def _known(self, requests: Sequence[Sequence[str]]) -> Collection[str]:
        """The GPUs this agent advertises; refuses a request naming another's device."""
        known = self._known_gpus()
        for ids in requests:
            unknown = [i for i in ids if physical_uuid(i, known) is None]
            if unknown:
                raise AllocateError(Code.INVALID_ARGUMENT,
                                    f"unknown device IDs {', '.join(unknown)}: not advertised "
                                    f"by this agent")
        return known

    def _claim(self, inflight: InFlight, requests: Sequence[Sequence[str]],
               known: Collection[str]) -> Claim:
        """The index's claim, with what a refusal or a failure says beyond the answer."""
        try:
            return inflight.claim(requests, known, self._wait)
        except Refused as exc:
            _log.warning("refused an Allocate for a pod vgpu did not place",
                         pod=pod_key(exc.pod))
            if self._on_refused is not None:
                self._on_refused(exc.pod, exc.reason)
            raise
        except Unservable as exc:
            _log.warning("allocation failed", pod=pod_key(exc.pod), reason=exc.reason)
            self._report(exc.pod, PHASE_FAILED, exc.reason)
            raise

    def _report(self, pod: Obj, phase: str, reason: str | None = None,
                extra: Mapping[str, str] | None = None,
                conditions: tuple[Mapping[str, str], ...] = ()) -> None:
        """Queue the pod's ``bind-phase`` patch (none without a cluster)."""
        if self._phases is not None:
            self._phases.submit(PhaseUpdate(meta.namespace(pod, "default"), meta.name(pod),
                                            phase, reason, extra or {}, meta.uid(pod),
                                            conditions))

    def _complete(self, pod: InFlightPod) -> None:
        """Mark the pod allocated, with the record ``vgpu why`` reads, in one patch."""
        now = self._now()
        bound = bind_time(meta.annotations_of(pod.pod))
        seconds = None if bound is None else now.timestamp() - bound
        if seconds is not None and self._on_complete is not None:
            self._on_complete(seconds)
        given = self._given or self.backend.current()
        record = Allocation(now, self._node, tuple(sorted(pod.done)), given.record(),
                            seconds)
        assert pod.assignment is not None  # a served pod has one
        self._report(pod.pod, PHASE_SUCCESS,
                     extra={ALLOCATION: encode_allocation(record),
                            isolation_modes.POD_ANNOTATION: given.mode},
                     conditions=(served_condition(pod.assignment, now),))

    # -- the pod watch ---------------------------------------------------------------------

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Pod informer handler: index the pod; and close a pod whose every container a
        previous run of this agent served but that it did not live to mark (the kubelet
        will not call again for it)."""
        self.ledger.on_pod(old, new)
        if self._inflight is None:
            return
        done = self._inflight.on_pod(old, new)
        if done is not None:
            _log.info("allocated before a restart; marking it", pod=done.key)
            self._complete(done)

    # -- Allocate --------------------------------------------------------------------------

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[grants.ContainerGrant]:
        """One grant per container request, in order; raises :class:`AllocateError`."""
        known = self._known(requests)
        inflight = self._index()
        with self._lock:
            claim = self._claim(inflight, requests, known)
            self._check_room(inflight, claim)
            live = self._given = self.backend.current()
            totals = self._totals()
            result = [self._grant(claim, name, ids, known=known, backend=live.backend,
                                  totals=totals)
                      for name, ids in zip(claim.containers, requests, strict=True)]
            served = inflight.served(claim)
        if (self._folders is not None and self.backend.answers.nodeagent.hami_core_path
                and live.backend in (isolation_modes.HAMI_CORE, isolation_modes.MPS_HAMI_CORE)):
            for item in result:
                self._folders.make(claim.pod.pod, served.uid, item.container,
                                   grants.cache_name(served.uid, item.container))
        complete = served.complete
        _log.info("allocated", pod=served.key, containers=list(claim.containers),
                  complete=complete, isolation=live.mode)
        if complete:
            self._complete(served)
        return result

    def _check_room(self, inflight: InFlight, claim: Claim) -> None:
        """Record the claim's grants in the ledger, or fail the pod when a GPU cannot take
        them on top of what this agent served."""
        assert claim.pod.assignment is not None  # a claimed pod has one
        self.ledger.restore(inflight.current())
        grants = {name: claim.pod.assignment.containers[name] for name in claim.containers}
        over = self.ledger.admit(claim.pod.uid, grants, self._devices(),
                                 claim.pod.assignment.before_apps)
        if over is None:
            return
        inflight.finish(claim.pod)
        _log.error("refused a grant past what the GPU has", pod=claim.pod.key, gpu=over.gpu,
                   used_mib=over.used.memory_mib, asked_mib=over.asked.memory_mib,
                   capacity_mib=over.capacity_mib)
        self._report(claim.pod.pod, PHASE_FAILED, over.message)
        if self._on_overcommit is not None:
            self._on_overcommit(claim.pod.pod, over.message)
        raise Overcommitted(claim.pod.pod, over.message)

    def _grant(self, claim: Claim, name: str, ids: Sequence[str], *, known: Collection[str],
               backend: str, totals: Mapping[str, int]) -> grants.ContainerGrant:
        """The answer for container ``name`` of the claimed pod, asked for with ``ids``."""
        assignment = claim.pod.assignment
        assert assignment is not None  # a claimed pod has one
        granted = assignment.containers[name]
        if {physical_uuid(i, known) for i in ids} != {g.uuid for g in granted}:
            # The assignment is what the scheduler accounted for, so it wins; the kubelet's
            # slot IDs only count slots.
            _log.info("kubelet picked slots on other GPUs than assigned",
                      pod=claim.pod.key, container=name, ids=list(ids))
        return answers.answer(backend, granted, pod_uid=claim.pod.uid, container=name,
                              priority=assignment.priorities.get(name),
                              totals=totals, config=self.backend.answers)

    # -- GetPreferredAllocation ------------------------------------------------------------

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int,
                  skip: Collection[str] = ()) -> tuple[list[str], str | None]:
        """The IDs to prefer and the container they are meant for (None: no pod known).

        ``skip`` names containers already matched by earlier requests of the same call.
        """
        known = self._known_gpus()
        target = (self._inflight.steer(size, skip, self._wait)
                  if self._inflight is not None else None)
        container, wanted = target if target is not None else (None, ())
        chosen = preferred.choose(available, must_include, size, list(wanted),
                                  lambda i: physical_uuid(i, known),
                                  links=None if wanted else self._links())
        return chosen, container

