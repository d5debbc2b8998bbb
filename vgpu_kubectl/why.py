"""``vgpu why POD``: one readable answer to "why is my pod pending", and where it went.

A pure function from what the cluster holds (the pod, its events, the nodes and the other
pods, as plain API dicts) to a :class:`Report`, plus its renderings
(:mod:`vgpu_kubectl.why_render`). Its sources, each written by the component that knew
the fact, at no extra API call:

- ``vgpu.io/admission`` (the webhook's patch), or a ``FailedAdmission`` event on a pod
  the webhook denied, which therefore does not exist, or its owner's ``FailedCreate``
  event when a namespace's ResourceQuota refused it (:mod:`vgpu_kubectl.why_quota`);
- ``spec.schedulingGates``; the scheduler's ``FailedScheduling`` events (the last
  attempt's per-node summary); ``vgpu.io/assignment``, ``bind-phase``, ``bind-time``;
- ``vgpu.io/allocation`` (the node agent's success patch): the Allocate answer's time,
  its delay after the binding, the isolation given;
- for a pending pod, the nodes closest to holding it now (:mod:`vgpu_kubectl.closest`);
- the node inventory's links: how fast a placed pod's GPUs talk, or what a pod that
  requires the fastest links is short of (:mod:`vgpu_kubectl.why_links`);
- ``vgpu.io/fault-domain`` and the scopes recorded in the assignments: whom the pod shares
  a GPU's faults with, and which GPUs it may not join (:mod:`vgpu_kubectl.fault_view`);
- ``runAsUser`` and the uids recorded in the assignments: which user the pod's MPS clients
  run as, and which MPS GPUs serve another (:mod:`vgpu_kubectl.mps_user_view`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu import heartbeat, meta, times
from vgpu.annotations import BIND_PHASE, BIND_REASON, BIND_TIME, NODE_GPUS, NODE_HEARTBEAT
from vgpu.codecs import assignment_of, decode_inventory
from vgpu.config import Config
from vgpu.errors import CodecError, RequestError
from vgpu.pod_history import ADMISSION, ALLOCATION, Allocation, decode_admission, decode_allocation
from vgpu.pods import node_name, pod_key
from vgpu.requests import ContainerRequest, parse_pod
from vgpu.usage import claimed, tally
from vgpu_kubectl import fault_view, mps_user_view, why_links, why_quota
from vgpu_kubectl.closest import NodeFit, closest_nodes

Obj = Mapping[str, Any]
DENIED_REASON = "FailedAdmission"


@dataclass(frozen=True)
class EventLine:
    time: str
    type: str
    reason: str
    message: str
    count: int = 1
    component: str = ""


@dataclass(frozen=True)
class GpuLine:
    container: str
    uuid: str
    index: int | None
    model: str
    memory_mib: int
    cores: int


@dataclass(frozen=True)
class Report:
    namespace: str
    name: str
    #: not-found, denied, quota-refused, gated, queued, unschedulable, allocating,
    #: allocated, running, allocation-failed, succeeded, failed, not-ours.
    state: str
    summary: str
    phase: str | None = None
    scheduler: str | None = None
    admission: tuple[str, ...] | None = None
    gates: tuple[str, ...] = ()
    last_attempt: EventLine | None = None
    closest: tuple[NodeFit, ...] = ()
    node: str | None = None
    bind_time: str | None = None
    gpus: tuple[GpuLine, ...] = ()
    #: Per container of several vGPUs, how fast its GPUs are linked.
    links: tuple[str, ...] = ()
    allocation: Allocation | None = None
    #: GPU memory in use vs granted: no component measures per-container use yet (the
    #: node agent's usage watchdog will); None until then.
    usage: Mapping[str, Any] | None = None
    events: tuple[EventLine, ...] = ()
    warnings: tuple[str, ...] = ()
    #: For a pod a ResourceQuota refused: each resource in plain words.
    quota: tuple[str, ...] = ()
    #: Whom the pod shares a GPU's faults with, when that narrows where it may go.
    fault_domain: str | None = None
    #: The user its MPS clients run as, where that narrows where it may go or it is on MPS.
    mps_user: str | None = None


def event_line(event: Obj) -> EventLine:
    when = event.get("lastTimestamp") or event.get("eventTime") or event.get(
        "firstTimestamp") or meta.of(event).get("creationTimestamp") or ""
    source = event.get("source") or {}
    return EventLine(str(when), str(event.get("type", "")), str(event.get("reason", "")),
                     str(event.get("message", "")), int(event.get("count") or 1),
                     str(event.get("reportingComponent") or source.get("component") or ""))


def _missing(namespace: str, name: str, events: list[EventLine],
             namespace_events: Sequence[Obj]) -> Report:
    denials = [e for e in events if e.reason == DENIED_REASON]
    refusals = why_quota.find(name, namespace_events)
    if refusals and not (denials and denials[-1].time > refusals[-1].time):
        refused = refusals[-1]
        summary = why_quota.summary(refused, namespace,
                                    why_quota.attempts(refused, namespace_events))
        return Report(namespace, name, "quota-refused", summary,
                      quota=why_quota.explain(refused), events=tuple(events[-5:]))
    if denials:
        last = denials[-1]
        return Report(namespace, name, "denied",
                      f"does not exist: the vgpu webhook denied it ({last.time}): "
                      f"{last.message}", events=tuple(events[-5:]))
    return Report(namespace, name, "not-found",
                  "does not exist, and no denial by the vgpu webhook is recorded for it",
                  events=tuple(events[-5:]))


def _placement(pod: Obj, nodes: Sequence[Obj], config: Config) -> dict[str, Any]:
    try:
        assignment = assignment_of(pod)
    except CodecError as exc:
        return {"warnings": [str(exc)]}
    if assignment is None:
        return {}
    node = next((n for n in nodes if meta.name(n) == assignment.node), None)
    inventory = None
    with contextlib.suppress(CodecError):
        inventory = decode_inventory(meta.annotations_of(node).get(NODE_GPUS)) if node else None
    devices = {d.uuid: d for d in inventory.devices} if inventory is not None else {}
    lines = []
    for container, granted in assignment.containers.items():
        for g in granted:
            d = devices.get(g.uuid)
            lines.append(GpuLine(container, g.uuid, d.index if d else None,
                                 d.model if d else "?", g.memory_mib, g.cores))
    mode = fault_view.configured_mode(node, config.isolation.mode) if node else None
    return {"gpus": tuple(lines), "links": why_links.placed_lines(assignment, inventory),
            "fault_domain": fault_view.for_placed(
                pod, assignment, config.isolation.fault_domains.defaults),
            "mps_user": mps_user_view.for_placed(pod, assignment, list(devices.values()),
                                                 mode)}


def _bound_state(pod: Obj, phase: str | None) -> tuple[str, str]:
    ann = meta.annotations_of(pod)
    node = node_name(pod)
    bind = ann.get(BIND_PHASE)
    if bind == "allocating":
        return "allocating", (f"bound to {node}; waiting for the kubelet to start it and "
                              f"the node agent to answer Allocate")
    if bind == "failed":
        return "allocation-failed", (f"bound to {node}, but the node agent refused it: "
                                     f"{ann.get(BIND_REASON, 'no reason given')}")
    if phase == "Running":
        return "running", f"running on {node}"
    return "allocated", f"allocated on {node}; pod phase {phase or 'unknown'}"


def _queue_state(pod: Obj, events: list[EventLine]) -> dict[str, Any]:
    """Where a pod no node holds stands: gated, unschedulable or queued."""
    gates = tuple(str(g.get("name", "")) for g in
                  (pod.get("spec") or {}).get("schedulingGates") or [])
    failed = [e for e in events if e.reason == "FailedScheduling"]
    if gates:
        return {"state": "gated", "gates": gates,
                "summary": f"held by scheduling gates {', '.join(gates)}: no scheduler "
                           f"tries it until they are removed"}
    if failed:
        return {"state": "unschedulable", "last_attempt": failed[-1],
                "summary": f"no node fits; the scheduler retries it when a node or pod "
                           f"changes in a way that could help (last attempt "
                           f"{failed[-1].time})"}
    return {"state": "queued", "summary": "waiting for the scheduler: no attempt has failed "
            "yet (queued, or held until its node's previous GPU pod is allocated)"}


def _placed_others(pod: Obj, pods: Sequence[Obj], config: Config) -> list[tuple[Obj, Any]]:
    """The other pods that hold GPU slices, with their assignments."""
    placed = []
    for p in pods:
        try:
            a = claimed(p, config.vgpu_schedulers)
        except CodecError:
            continue
        if a is not None and pod_key(p) != pod_key(pod):
            placed.append((p, a))
    return placed


def _pending(pod: Obj, events: list[EventLine], nodes: Sequence[Obj],
             pods: Sequence[Obj], *, config: Config, now: dt.datetime) -> dict[str, Any]:
    out = _queue_state(pod, events)
    try:
        request = parse_pod(pod, config)
    except RequestError as exc:
        out["warnings"] = (f"the pod's GPU request cannot be read: {exc}",)
        return out
    inventories, stale = {}, {}
    expiry = config.node_heartbeat_expiry_seconds
    for n in nodes:
        ann = meta.annotations_of(n)
        name = meta.name(n)
        if NODE_GPUS not in ann:
            continue
        try:
            inventories[name] = decode_inventory(ann[NODE_GPUS])
            beat = times.parse(ann.get(NODE_HEARTBEAT), NODE_HEARTBEAT).timestamp()
        except CodecError:
            beat = None
        if not heartbeat.fresh(beat, now.timestamp(), expiry):
            stale[name] = f"node agent not reporting (heartbeat older than {expiry:g}s)"
    placed = _placed_others(pod, pods, config)
    usages = tally(a for _, a in placed)
    devices = {n: i.devices for n, i in inventories.items()}
    modes = fault_view.configured_modes(nodes, config.isolation.mode)
    try:
        out["fault_domain"], barred = fault_view.for_pending(
            pod, placed, devices, modes, config.isolation.fault_domains.defaults)
    except RequestError as exc:
        out["warnings"] = (str(exc),)
        barred = {}
    out["mps_user"], users = mps_user_view.for_pending(
        pod, request, placed, devices, modes, on=config.isolation.mps.place_by_user)
    selector, scaling = request.choices.selector, config.device_memory_scaling

    def beyond(node: str, container: ContainerRequest) -> str | None:
        return why_links.required_short(container, inventories[node], usages=usages,
                                        selector=selector, scaling=scaling)

    out["closest"] = closest_nodes(
        request.containers, devices, stale=stale, usages=usages, selector=selector,
        scaling=scaling, beyond=beyond if request.choices.topology_required else None,
        barred=barred, users=users)
    return out


@dataclass(frozen=True)
class Cluster:
    """What the report reads: the pod (None when it does not exist) and its events; for a
    pending pod's closest nodes, every node and pod; for a missing one, the events of its
    namespace (an owner's FailedCreate names the pod only in its message)."""

    pod: Obj | None
    events: Sequence[Obj] = ()
    nodes: Sequence[Obj] = ()
    pods: Sequence[Obj] = ()
    namespace_events: Sequence[Obj] = ()


def build(namespace: str, name: str, seen: Cluster, *, config: Config,
          now: dt.datetime) -> Report:
    pod, nodes = seen.pod, seen.nodes
    lines = sorted((event_line(e) for e in seen.events), key=lambda e: e.time)
    if pod is None:
        return _missing(namespace, name, lines, seen.namespace_events)
    ann = meta.annotations_of(pod)
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    warnings: list[str] = []
    fields: dict[str, Any] = {"phase": phase, "scheduler": spec.get("schedulerName"),
                              "events": tuple(lines[-5:])}
    if ADMISSION in ann:
        try:
            fields["admission"] = decode_admission(ann[ADMISSION])
        except CodecError as exc:
            warnings.append(str(exc))
    if phase in ("Succeeded", "Failed"):
        fields.update(state=phase.lower(), summary=f"finished: {phase}")
    elif node_name(pod) is not None:
        state, summary = _bound_state(pod, phase)
        placed = _placement(pod, nodes, config)
        warnings += placed.pop("warnings", ())
        fields.update(state=state, summary=summary, node=node_name(pod),
                      bind_time=ann.get(BIND_TIME), **placed)
    elif spec.get("schedulerName") != config.scheduler_name:
        other = spec.get("schedulerName") or "default-scheduler"
        fields.update(state="not-ours", summary=f"scheduled by {other}, not "
                      f"{config.scheduler_name}: the vgpu webhook did not route it (no GPU "
                      f"resources, or another scheduler named)")
    else:
        fields.update(_pending(pod, lines, nodes, seen.pods, config=config, now=now))
        warnings += fields.pop("warnings", ())
    if ALLOCATION in ann:
        try:
            fields["allocation"] = decode_allocation(ann[ALLOCATION])
        except CodecError as exc:
            warnings.append(str(exc))
    return Report(namespace, name, warnings=tuple(warnings), **fields)
