"""The admission decision for one pod: allow, allow with a JSONPatch, or deny.

Pure: it takes the ``request`` of an AdmissionReview, the configuration and a snapshot
of the cluster's GPUs, and returns an
:class:`~vgpu_webhook.verdict.AdmissionVerdict`. Every rule about what a request
means (counts, memory, percentages, cores, priority, annotations) comes from
:mod:`vgpu.requests` and :mod:`vgpu.devices`, so the webhook and the scheduler cannot
disagree on a pod.

About ``nvidia.com/priority``: the webhook validates it (0 or 1, through the core's parser),
makes sure the container gets a vGPU to carry it (``nvidia.com/gpu: 1`` when no count is
given) and keeps the resource on the container. It adds nothing else, on purpose: the node
agent's Allocate answers ``CUDA_TASK_PRIORITY`` (the variable HAMi-core's limiter reads)
from that same resource (docs/contracts.md#allocate-answer). An env entry written here as
well would be a second copy of one fact; and the kubelet merges device-plugin envs and the
container's own envs in an order the runtime decides, so two writers could disagree about
which value the limiter sees.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from vgpu import fault_domains, init_resources, meta, quota_charge
from vgpu.annotations import GPUMEM_PERCENTAGE, GpuSelector
from vgpu.config import Config
from vgpu.devices import check_possible, memory_capacity, percent_of
from vgpu.errors import QuantityError, RequestError
from vgpu.pod_history import ADMISSION, encode_admission
from vgpu.quantity import parse_whole
from vgpu.quota_charge import Charge
from vgpu.requests import ContainerRequest, ParsedPod, PodRequest, parse_gpu_pod
from vgpu_webhook.derived_requests import Place, UnknownGpuError, charges
from vgpu_webhook.gpus import ClusterGpus
from vgpu_webhook.init_moves import move_off
from vgpu_webhook.mps_users import user_ops
from vgpu_webhook.operator_knobs import knob_ops
from vgpu_webhook.patch import Op, add, describe, update_mapping
from vgpu_webhook.route_around import route_around
from vgpu_webhook.verdict import AdmissionVerdict, allow, deny, mutated


def _is_pod_create(request: Mapping[str, Any]) -> bool:
    if request.get("operation") != "CREATE" or request.get("subResource"):
        return False
    kind = request.get("kind")
    return (isinstance(kind, Mapping) and kind.get("kind") == "Pod"
            and kind.get("group", "") == "")


def decide(request: Mapping[str, Any], config: Config, gpus: ClusterGpus) -> AdmissionVerdict:
    """Decide on one admission request (the ``request`` member of an AdmissionReview)."""
    if not _is_pod_create(request):
        return allow("skipped", "not a pod creation")
    try:
        parsed = parse_gpu_pod(request.get("object"), config)
    except RequestError as exc:
        return deny(str(exc))
    if parsed is None:
        return allow("skipped", "not a GPU pod")
    namespace = str(request.get("namespace") or meta.namespace(parsed.pod, "default"))
    try:
        # Whom the pod shares a fault domain with: checked here so that a typo is told at
        # once instead of keeping the pod pending (the scheduler refuses it the same way).
        fault_domains.stated(meta.annotations_of(request.get("object") or {}))
        users = user_ops(parsed, config, namespace)
    except RequestError as exc:
        return deny(str(exc))
    # One rule, whatever scheduler the pod names: a GPU pod is placed by vgpu, or refused.
    around = route_around(parsed, config)
    if around is not None:
        return deny(around, code=403)
    denial = _impossible(parsed, config, gpus)
    if denial is not None:
        return deny(denial)
    # Percentages the patch turns into MiB, by container: the charge reads them so too.
    mibs = {c.name: mib for c in parsed.containers
            if (mib := _resolved(c.container, c.request, parsed.request, config, gpus))
            is not None}
    charged: dict[Place, Charge] = {}
    if config.quota.derived_requests:
        try:
            charged = charges(_as_resolved(parsed, mibs), config, gpus, namespace)
        except UnknownGpuError as exc:
            return deny(str(exc), code=403)
    ops = _patch(parsed, config, mibs, charged, users)
    if not ops:
        return allow("unchanged", "GPU pod needs no change", parsed.request.notes)
    return mutated(tuple(ops), parsed.request.notes)


def _impossible(parsed: ParsedPod, config: Config, gpus: ClusterGpus) -> str | None:
    """Why no node of the cluster could ever hold the pod, as far as the GPU types vgpu
    knows go (live, seen before, declared); None when one could or nothing is known."""
    if not gpus.known:
        return None
    declared = config.quota.declared_gpus()
    stand_ins = [kind.device() for kind in gpus.every_kind(GpuSelector(), declared)]
    # Nodes of a type not up now may have more GPUs than any up now.
    per_node = 0 if (gpus.remembered or declared) else gpus.max_gpus_per_node
    try:
        for container in parsed.request.containers:
            check_possible(container, stand_ins, max_gpus_per_node=per_node,
                           scaling=config.device_memory_scaling,
                           gpu_name=config.resource_names.gpu,
                           mem_name=config.resource_names.gpumem)
    except RequestError as exc:
        return str(exc)
    return None


def resolve_percentage(percent: int, parsed: PodRequest, config: Config,
                       gpus: ClusterGpus) -> int | None:
    """MiB for ``percent`` when every GPU the pod may land on has one scaled size.

    ``None`` when that is not so (several sizes, no GPU left by the annotations, or no
    inventory): the scheduler then resolves the percentage against the GPU it picks.
    """
    kinds = gpus.every_kind(parsed.choices.selector, config.quota.declared_gpus())
    if not kinds:
        return None
    scaling = config.device_memory_scaling
    sizes = {memory_capacity(kind.device(), scaling) for kind in kinds}
    if len(sizes) != 1:
        return None
    mib = percent_of(percent, kinds[0].device(), scaling)
    # 1 % of a tiny GPU floors to 0 MiB, which is not a valid gpumem; leave it relative.
    return mib if mib >= 1 else None


def _sections(container: Mapping[str, Any]) -> tuple[Any, Any]:
    """A container's limits and requests as they are (parse_pod checked the shapes: each
    is a mapping, null or absent, and so is ``resources``)."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None, None
    return resources.get("limits"), resources.get("requests")


def _gpu_wants(request: ContainerRequest, limits: Mapping[str, Any],
               requests: Mapping[str, Any], resolved_mib: int | None,
               config: Config) -> tuple[dict[str, Any], dict[str, Any]]:
    names = config.resource_names
    want_limits = dict(limits)
    want_requests = dict(requests)
    # The kubelet hands devices out by limits, and the API server rejects an extended
    # resource given in requests alone, so requests-only containers get the same limits.
    for name in names.all():
        if name in requests and name not in limits:
            want_limits[name] = requests[name]
    gives_requests = any(name in requests for name in names.all())
    if request.count_defaulted:
        want_limits[names.gpu] = str(request.count)
        # Requests, when given, must equal limits for extended resources.
        if gives_requests:
            want_requests[names.gpu] = str(request.count)
    if request.cores_defaulted:
        # HAMi's webhook writes it: a whole GPU's memory and no cores is the whole GPU.
        want_limits[names.gpucores] = "100"
        if gives_requests:
            want_requests[names.gpucores] = "100"
    if resolved_mib is not None:
        for want in (want_limits, want_requests):
            if names.gpumem_percentage in want:
                del want[names.gpumem_percentage]
                want[names.gpumem] = str(resolved_mib)
    return want_limits, want_requests


def _container_ops(base: str, container: Mapping[str, Any], request: ContainerRequest | None,
                   resolved_mib: int | None, charge: Charge | None, *,
                   config: Config, moved: dict[str, dict[str, str]]) -> list[Op]:
    """The ops on one container's ``resources``: the GPU defaults for a GPU container
    (``request``), and with derived requests on, exactly ``charge`` under the derived names
    (none at all for ``None``), whatever the pod gave there."""
    current_limits, current_requests = _sections(container)
    limits: Mapping[str, Any] = current_limits or {}
    requests: Mapping[str, Any] = current_requests or {}
    if request is not None:
        want_limits, want_requests = _gpu_wants(request, limits, requests, resolved_mib, config)
        if request.init:
            off = move_off(want_limits, want_requests, config)
            if off:
                moved[request.name] = {**moved.get(request.name, {}), **off}
    else:
        want_limits, want_requests = dict(limits), dict(requests)
    if config.quota.derived_requests:
        derived = charge.by_name() if charge is not None else {}
        for want in (want_limits, want_requests):
            for name in quota_charge.NAMES:
                # Requests and limits equal, as Kubernetes requires of extended resources;
                # a value the API server stored in its canonical form ("3k") stays.
                if name not in derived:
                    want.pop(name, None)
                elif not _same(want.get(name), derived[name]):
                    want[name] = str(derived[name])
    if not isinstance(container.get("resources"), Mapping):
        sections = {part: want for part, want in (("limits", want_limits),
                                                   ("requests", want_requests)) if want}
        return [add(base, sections)] if sections else []
    return (update_mapping(f"{base}/limits", current_limits, want_limits)
            + update_mapping(f"{base}/requests", current_requests, want_requests))


def _as_resolved(parsed: ParsedPod, mibs: Mapping[str, int]) -> ParsedPod:
    """The pod as it will read once its percentages are turned into ``mibs``."""
    if not mibs:
        return parsed
    out = []
    for c in parsed.containers:
        mib = mibs.get(c.name)
        out.append(c if mib is None or c.request is None else dataclasses.replace(
            c, request=dataclasses.replace(c.request, memory_mib=mib, memory_percent=None)))
    return dataclasses.replace(parsed, containers=tuple(out), request=dataclasses.replace(
        parsed.request, containers=tuple(c.request for c in out if c.request is not None)))


def _patch(parsed: ParsedPod, config: Config, mibs: Mapping[str, int],
           charged: Mapping[Place, Charge], users: list[Op]) -> list[Op]:
    ops: list[Op] = []
    named = parsed.spec.get("schedulerName")
    if not (isinstance(named, str) and named in config.vgpu_schedulers):
        ops.append(add("/spec/schedulerName", config.scheduler_name))

    resolved: dict[str, int] = {}
    before = {name: {k: str(v) for k, v in values.items()} for name, values in
              init_resources.decode(meta.annotations_of(parsed.pod)).items()}
    moved = {name: dict(values) for name, values in before.items()}
    for container in parsed.containers:
        request = container.request
        charge = charged.get((container.key, container.position))
        if request is None and not (config.quota.derived_requests and (
                charge is not None or _names_derived(container.container))):
            continue
        mib = mibs.get(container.name) if request is not None else None
        if mib is not None and request is not None and request.memory_percent is not None:
            resolved[request.name] = request.memory_percent
        # key and position need no escaping; resource names are escaped in the ops.
        ops.extend(_container_ops(f"/spec/{container.key}/{container.position}/resources",
                                  container.container, request, mib, charge, config=config,
                                  moved=moved))
    ops.extend([*knob_ops(parsed, config), *users])

    if not ops:
        return ops
    return [*ops, *_record_ops(parsed, ops, _records(before, moved, resolved))]


def _records(before: Mapping[str, Mapping[str, str]], moved: Mapping[str, Mapping[str, str]],
             resolved: Mapping[str, int]) -> dict[str, str]:
    """vgpu's own pod annotations the patch writes beside the admission record."""
    records = {}
    if moved and moved != before:
        records[init_resources.INIT_RESOURCES] = init_resources.encode(moved)
    if resolved:
        records[GPUMEM_PERCENTAGE] = json.dumps(resolved, separators=(",", ":"),
                                                sort_keys=True)
    return records


def _record_ops(parsed: ParsedPod, ops: list[Op], records: dict[str, str]) -> list[Op]:
    # What this patch changes, for `vgpu why`: part of the same patch, so it costs nothing.
    records[ADMISSION] = encode_admission(describe(ops, parsed.spec))
    metadata = parsed.pod.get("metadata")
    if not isinstance(metadata, Mapping):
        return [add("/metadata", {"annotations": records})]
    annotations = metadata.get("annotations")
    desired = dict(annotations) if isinstance(annotations, Mapping) else {}
    desired.update(records)
    return list(update_mapping("/metadata/annotations", annotations, desired))


def _resolved(container: Mapping[str, Any], request: ContainerRequest | None,
              parsed: PodRequest, config: Config, gpus: ClusterGpus) -> int | None:
    """MiB an explicit ``gpumem-percentage`` of the container becomes, when it can."""
    if request is None or request.memory_percent is None:
        return None
    percentage = config.resource_names.gpumem_percentage
    limits, requests = _sections(container)
    if percentage not in (limits or {}) and percentage not in (requests or {}):
        return None
    return resolve_percentage(request.memory_percent, parsed, config, gpus)


def _same(written: Any, value: int) -> bool:
    try:
        return written is not None and parse_whole(written) == value
    except QuantityError:
        return False


def _names_derived(container: Mapping[str, Any]) -> bool:
    """Whether the container already names a derived resource (the pod's own, to undo)."""
    limits, requests = _sections(container)
    return any(isinstance(part, Mapping) and name in part
               for part in (limits, requests) for name in quota_charge.NAMES)
