"""Allocate and GetPreferredAllocation, without the gRPC around them.

Allocate finds the node's in-flight pods in the local pod cache, matches each container
request to a container of one of them (by the GPUs its device IDs name, else by device
count on the oldest; :mod:`vgpu_nodeagent.allocation.matching`), and answers that
container's grant from the pod's assignment. When every GPU container of the pod is
allocated, the pod's ``bind-phase`` becomes ``success``; when the pod cannot be served (bad
assignment, a count no container has), ``failed`` with a reason, so the scheduler's gate
for the node opens instead of waiting for its timeout.

An Allocate that is the own of a pod vgpu did not place (``Admission.refused``) is refused,
``PERMISSION_DENIED``, not served a pod in allocation's grant: that pod's comes next.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence

from vgpu import isolation_modes, logs, meta
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, PHASE_ALLOCATING, PHASE_FAILED, PHASE_SUCCESS
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment, assignment_of, bind_time
from vgpu.config import Config
from vgpu.errors import CodecError
from vgpu.pod_history import ALLOCATION, Allocation, encode_allocation
from vgpu.pods import container_names, pod_key
from vgpu_nodeagent.allocation import matching, preferred
from vgpu_nodeagent.allocation.errors import AllocateError, Code
from vgpu_nodeagent.allocation.inflight import InFlight, is_allocating, refusal, uid_of
from vgpu_nodeagent.allocation.phases import PhaseUpdate, PhaseWriter
from vgpu_nodeagent.devices.virtual import physical_uuid
from vgpu_nodeagent.isolation import answers, grants
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
                 on_refused: Callable[[Obj, str], None] | None = None) -> None:
        self._config = config
        self._on_refused = on_refused  # told each refused pod and why (an event, a metric)
        self.backend = backend if backend is not None else Backend(config)
        # MiB of each GPU, so that a whole-GPU grant gets no MPS memory pin.
        self._totals = totals
        # What the last answered containers got, for the record of the pod they complete.
        self._given: Live | None = None
        self._node = node
        self._resource = config.nodeagent.resource_name or config.resource_names.gpu
        self._inflight = inflight
        self._phases = phases
        self._known_gpus = known_gpus
        # The node's GPU links, for GetPreferredAllocation when no assignment steers it.
        self._links = links
        self._wait = wait_seconds
        self._prepare_host_dirs = prepare_host_dirs
        # Told the bind-to-Allocate seconds of each pod this agent completes (a metric).
        self._on_complete = on_complete
        self._now = now
        # The kubelet calls one at a time; the lock keeps "match, then mark done" atomic
        # should it ever not.
        self._lock = threading.Lock()

    # -- helpers ---------------------------------------------------------------------------

    def _pods(self, sizes: Sequence[int]) -> list[Obj]:
        """The node's pods in allocation, in the order their bindings arrived (waiting for
        one); refuses the request when it is a pod's that vgpu did not place."""
        if self._inflight is None:
            raise AllocateError(
                Code.FAILED_PRECONDITION,
                "this node agent runs without a cluster (--no-cluster), so it cannot tell "
                "which pod a device request is for; run it with cluster access")
        admission = self._inflight.wait(self._wait)
        intruder = admission.refused(sizes, self._resource)
        if intruder is not None:
            raise self._refuse(intruder)
        pods = admission.pods
        if not pods:
            raise AllocateError(
                Code.FAILED_PRECONDITION,
                f"no pod on node {self._node} is in {BIND_PHASE}={PHASE_ALLOCATING} (waited "
                f"{self._wait:g}s for the local pod watch); Allocate names no pod, so vgpu "
                f"serves only pods placed by its scheduler")
        return pods

    def _match(self, pods: Sequence[Obj], gpu_sets: Sequence[frozenset[str]],
               ) -> tuple[Obj, Assignment, tuple[str, ...]]:
        """The pod and containers the requests are for: by the GPUs their device IDs name,
        else the oldest pod by device counts (failing it when that cannot serve them)."""
        assert self._inflight is not None
        readable: list[tuple[Obj, matching.Candidate]] = []
        for pod in pods:
            try:
                assignment = self._assignment(pod)
            except CodecError:
                continue
            readable.append((pod, matching.Candidate(
                assignment, tuple(container_names(pod)), self._inflight.done(pod))))
        found = matching.choose(gpu_sets, [c for _, c in readable])
        if found is not None:
            pod, candidate = readable[found[0]]
            return pod, candidate.assignment, found[1]
        pod = pods[0]
        try:
            assignment = self._assignment(pod)
            names = matching.match_requests([len(g) for g in gpu_sets], assignment,
                                            container_names(pod), self._inflight.done(pod))
        except (CodecError, matching.MatchError) as exc:
            raise self._fail(pod, Code.INVALID_ARGUMENT, str(exc)) from None
        if len(pods) > 1:
            _log.warning("no pod in allocation matches the device IDs; serving the oldest "
                         "by device count", pods=[pod_key(p) for p in pods])
        return pod, assignment, names

    def _refuse(self, pod: Obj) -> AllocateError:
        assert self._inflight is not None
        self._inflight.refuse(pod)
        reason = refusal(pod, self._resource, self._node)
        _log.warning("refused an Allocate for a pod vgpu did not place", pod=pod_key(pod))
        if self._on_refused is not None:
            self._on_refused(pod, reason)
        return AllocateError(Code.PERMISSION_DENIED, f"pod {pod_key(pod)}: {reason}")

    def _fail(self, pod: Obj, code: Code, reason: str) -> AllocateError:
        message = f"pod {pod_key(pod)}: {reason}"
        _log.warning("allocation failed", pod=pod_key(pod), reason=reason)
        if self._inflight is not None:
            self._inflight.finish(pod)
        self._report(pod, PHASE_FAILED, reason)
        return AllocateError(code, message)

    def _report(self, pod: Obj, phase: str, reason: str | None = None,
                extra: Mapping[str, str] | None = None) -> None:
        """Queue the pod's ``bind-phase`` patch (none without a cluster)."""
        if self._phases is not None:
            self._phases.submit(PhaseUpdate(meta.namespace(pod, "default"), meta.name(pod),
                                            phase, reason, extra or {}, meta.uid(pod)))

    def _complete(self, pod: Obj, containers: Collection[str]) -> None:
        """Mark the pod allocated, with the record ``vgpu why`` reads, in one patch."""
        now = self._now()
        bound = bind_time(meta.annotations_of(pod))
        seconds = None if bound is None else now.timestamp() - bound
        if seconds is not None and self._on_complete is not None:
            self._on_complete(seconds)
        given = self._given or self.backend.current()
        record = Allocation(now, self._node, tuple(sorted(containers)), given.record(),
                            seconds)
        self._report(pod, PHASE_SUCCESS, extra={ALLOCATION: encode_allocation(record),
                                                isolation_modes.POD_ANNOTATION: given.mode})

    def _assignment(self, pod: Obj) -> Assignment:
        assignment = assignment_of(pod)
        if assignment is None:
            raise CodecError(f"it has no {ASSIGNMENT} annotation")
        if assignment.node != self._node:
            raise CodecError(f"its assignment is for node {assignment.node!r}, "
                             f"not this node {self._node!r}")
        return assignment

    # -- the pod watch ---------------------------------------------------------------------

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Pod informer handler: index the pod; and close a pod whose every container a
        previous run of this agent served but that it did not live to mark (the kubelet
        will not call again for it)."""
        if self._inflight is None:
            return
        self._inflight.on_pod(old, new)
        if new is None or not is_allocating(new):
            return
        done = self._inflight.done(new)
        if not done:
            return
        try:
            finished = matching.all_done(self._assignment(new), done)
        except CodecError:
            return
        if finished and self._inflight.finish(new):
            _log.info("allocated before a restart; marking it", pod=pod_key(new))
            self._complete(new, done)

    # -- Allocate --------------------------------------------------------------------------

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[grants.ContainerGrant]:
        """One grant per container request, in order; raises :class:`AllocateError`."""
        known = self._known_gpus()
        for ids in requests:
            unknown = [i for i in ids if physical_uuid(i, known) is None]
            if unknown:
                raise AllocateError(Code.INVALID_ARGUMENT,
                                    f"unknown device IDs {', '.join(unknown)}: not advertised "
                                    f"by this agent")
        with self._lock:
            pods = self._pods([len(ids) for ids in requests])
            assert self._inflight is not None
            gpu_sets = [matching.gpus_of(ids, known) for ids in requests]
            pod, assignment, names = self._match(pods, gpu_sets)
            uid = uid_of(pod)
            live = self._given = self.backend.current()
            totals = self._totals()
            result = []
            for name, ids in zip(names, requests, strict=True):
                granted = assignment.containers[name]
                asked = {physical_uuid(i, known) for i in ids}
                if asked != {g.uuid for g in granted}:
                    # The assignment is what the scheduler accounted for, so it wins; the
                    # kubelet's slot IDs only count slots.
                    _log.info("kubelet picked slots on other GPUs than assigned",
                              pod=pod_key(pod), container=name, ids=list(ids))
                result.append(answers.answer(
                    live.backend, granted, pod_uid=uid, container=name,
                    priority=assignment.priorities.get(name), totals=totals,
                    config=self._config))
            self._inflight.mark_done(pod, names)
            finished = matching.all_done(assignment, self._inflight.done(pod))
            if finished:
                self._inflight.finish(pod)
        if (self._prepare_host_dirs and self._config.nodeagent.hami_core_path
                and live.backend == isolation_modes.HAMI_CORE):
            for item in result:
                self._make_cache_dir(uid, item.container)
        _log.info("allocated", pod=pod_key(pod), containers=list(names), complete=finished,
                  isolation=live.mode)
        if finished:
            self._complete(pod, self._inflight.done(pod))
        return result

    def _make_cache_dir(self, pod_uid: str, container: str) -> None:
        path = grants.container_cache_host_dir(pod_uid, container, self._config)
        try:
            os.makedirs(path, exist_ok=True)
            # The workload's user is not ours to predict.
            os.chmod(path, 0o777)
        except OSError as exc:
            _log.warning("cannot create the container's cache folder; the runtime will",
                         path=path, error=exc.strerror)

    # -- GetPreferredAllocation ------------------------------------------------------------

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int,
                  skip: Collection[str] = ()) -> tuple[list[str], str | None]:
        """The IDs to prefer and the container they are meant for (None: no pod known).

        ``skip`` names containers already matched by earlier requests of the same call.
        """
        known = self._known_gpus()
        wanted: list[str] = []
        container: str | None = None
        admission = self._inflight.wait(self._wait) if self._inflight is not None else None
        # An intruder's request is steered to no pod's GPUs (its Allocate will be refused).
        pods = [] if admission is None or admission.refused([size], self._resource) else \
            admission.pods
        # The request names no pod: steer it to the first in-flight pod with a container of
        # that size still waiting (the kubelet admits pods in the order its watch shows the
        # bindings, which is the order ours showed them).
        for pod in pods:
            try:
                assignment = self._assignment(pod)
                done = self._inflight.done(pod) | set(skip) if self._inflight else set(skip)
                (container,) = matching.match_requests(
                    [size], assignment, container_names(pod), done)
            except (CodecError, matching.MatchError) as exc:
                _log.info("no assigned GPUs to prefer", pod=pod_key(pod), reason=str(exc))
                continue
            wanted = [g.uuid for g in assignment.containers[container]]
            break
        chosen = preferred.choose(available, must_include, size, wanted,
                                  lambda i: physical_uuid(i, known),
                                  links=None if wanted else self._links())
        return chosen, container
