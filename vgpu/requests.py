"""A pod's GPU request, parsed once with the defaulting rules of
docs/contracts.md#request-defaults.

The webhook, the scheduler and the kubectl plugin all parse with the same rules, so they
agree by construction on what a container asked for (the node agent answers from the
assignment the scheduler derived from it): :func:`parse_pod` gives the request, and
:func:`parse_gpu_pod`, for the webhook, the request with each container's place in the
spec, so that what it patches is not looked for again. Input is the pod as a plain dict,
the way the API server returns it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.annotations import PodChoices, parse_pod_choices
from vgpu.config import Config, ResourceNames
from vgpu.errors import QuantityError, RequestError
from vgpu.pods import ContainerRef, containers
from vgpu.quantity import parse_whole
from vgpu.shape_memo import Memo, resources_key

#: The in-container limiter understands these two: 0 is high priority, 1 is low.
PRIORITIES = (0, 1)
#: A container's five vgpu resources when it names them all null.
_UNSET = (None,) * 5
_MEMO: Memo[tuple[bool, ContainerRequest | None]] = Memo()


@dataclass(frozen=True)
class ContainerRequest:
    """What one container asked for, per vGPU, after defaulting.

    Exactly one of ``memory_mib`` and ``memory_percent`` is set: an absolute size, or a
    share of whichever GPU the scheduler picks (100 = the whole GPU).
    """

    name: str
    count: int
    memory_mib: int | None
    memory_percent: int | None
    cores: int
    priority: int | None = None
    init: bool = False
    #: True when the container itself named no count and the default of 1 was applied.
    count_defaulted: bool = False

    @property
    def exclusive(self) -> bool:
        """100 cores means the whole GPU: it needs an idle one and takes it alone."""
        return self.cores >= 100


@dataclass(frozen=True)
class PodRequest:
    """All GPU containers of a pod (init containers included), keyed by container name."""

    containers: tuple[ContainerRequest, ...]
    choices: PodChoices

    def by_name(self) -> dict[str, ContainerRequest]:
        return {c.name: c for c in self.containers}

    @property
    def is_gpu_pod(self) -> bool:
        return bool(self.containers)

    @property
    def max_count(self) -> int:
        return max((c.count for c in self.containers), default=0)

    def priorities(self) -> dict[str, int]:
        """The task priority of each container that gave one, by name."""
        return {c.name: c.priority for c in self.containers if c.priority is not None}


def _resources(container: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any],
                                                                  Mapping[str, Any]]:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise RequestError(f"{where}: resources must be a mapping")
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    if not isinstance(limits, Mapping) or not isinstance(requests, Mapping):
        raise RequestError(f"{where}: resources.limits and resources.requests must be mappings")
    return limits, requests


def _value(limits: Mapping[str, Any], requests: Mapping[str, Any], name: str,
           where: str) -> int | None:
    # Limits win: for extended resources Kubernetes requires requests == limits anyway,
    # and a pod that gives only limits gets requests copied from them.
    raw = limits.get(name, requests.get(name))
    if raw is None:
        return None
    try:
        return parse_whole(raw)
    except QuantityError as exc:
        raise QuantityError(f"{where}: {name}: {exc}") from None


def names_gpu_resource(pod: Any, config: Config) -> bool:
    """Whether any container or init container names one of the vgpu resources.

    This is the cheap test that decides whether the webhook touches a pod at all, so it
    never raises on malformed input: a pod too broken to inspect is not a GPU pod.
    """
    if not isinstance(pod, Mapping):
        return False
    names = set(config.resource_names.all())
    for ref in containers(pod):
        resources = ref.container.get("resources") if isinstance(ref.container, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        for part in ("limits", "requests"):
            section = resources.get(part)
            if isinstance(section, Mapping) and names.intersection(section):
                return True
    return False


def _check(where: str, rn: ResourceNames, *, count: int, memory: int | None,
           percent: int | None, cores: int | None, priority: int | None) -> None:
    """Refuse values outside what the resources mean, naming the container and resource."""
    if count < 1:
        raise RequestError(f"{where}: {rn.gpu} is {count}; ask for at least 1 GPU")
    if memory is not None and percent is not None:
        raise RequestError(
            f"{where}: gives both {rn.gpumem} and {rn.gpumem_percentage}; keep only one"
        )
    if memory is not None and memory < 1:
        raise RequestError(f"{where}: {rn.gpumem} is {memory}; give at least 1 MiB")
    if percent is not None and not 1 <= percent <= 100:
        raise RequestError(
            f"{where}: {rn.gpumem_percentage} is {percent}; it must be between 1 and 100"
        )
    if cores is not None and not 0 <= cores <= 100:
        raise RequestError(f"{where}: {rn.gpucores} is {cores}; it must be between 0 and 100")
    if priority is not None and priority not in PRIORITIES:
        raise RequestError(f"{where}: {rn.priority} is {priority}; use 0 (high) or 1 (low)")


def parse_container(container: Mapping[str, Any], config: Config, *, init: bool = False,
                    where: str | None = None) -> ContainerRequest | None:
    """Parse one container; ``None`` when it names no vgpu resource."""
    return _parse_container(container, config, init=init, where=where)[1]


def _parse_container(container: Mapping[str, Any], config: Config, *, init: bool,
                     where: str | None) -> tuple[bool, ContainerRequest | None]:
    """Whether the container names a vgpu resource at all, and its request (None also
    when every resource it names is null); remembered by what it reads."""
    key, name = resources_key(container), container.get("name")
    if key is None or type(name) is not str or not name:
        return _read_container(container, config, init=init, where=where)
    return _MEMO.through((name, init, key, config.resource_names, config.default_mem,
                          config.default_cores),
                         lambda: _read_container(container, config, init=init, where=where))


def _read_container(container: Mapping[str, Any], config: Config, *, init: bool,
                    where: str | None) -> tuple[bool, ContainerRequest | None]:
    name = container.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError(f"{where or 'container'}: every container needs a name")
    where = where or f"container {name!r}"
    limits, requests = _resources(container, where)
    rn = config.resource_names
    resources = rn.all()
    for resource in resources:
        if resource in limits or resource in requests:
            break
    else:
        return False, None  # most containers of most pods: not worth five lookups each
    count, memory, percent, cores, priority = (
        _value(limits, requests, resource, where) for resource in resources)
    if (count, memory, percent, cores, priority) == _UNSET:
        return True, None
    _check(where, rn, count=1 if count is None else count, memory=memory, percent=percent,
           cores=cores, priority=priority)
    if memory is None and percent is None:
        if config.default_mem > 0:
            memory = config.default_mem
        else:
            percent = 100
    return True, ContainerRequest(
        name=name,
        count=1 if count is None else count,
        memory_mib=memory,
        memory_percent=percent,
        cores=config.default_cores if cores is None else cores,
        priority=priority,
        init=init,
        count_defaulted=count is None,
    )


@dataclass(frozen=True)
class SpecContainer:
    """One container of a pod's spec as the parse read it: where it sits, so that a
    JSONPatch path can be written from it (``/spec/{key}/{position}``) without looking for
    it again, the object as the pod gives it, and what it asks for."""

    #: ``"initContainers"`` or ``"containers"``: the spec list it is in.
    key: str
    position: int
    init: bool
    name: str
    container: Mapping[str, Any]
    #: Its GPU request; None for a container that names no vgpu resource.
    request: ContainerRequest | None


@dataclass(frozen=True)
class ParsedPod:
    """A GPU pod read once: every container in start order (GPU or not) with its place in
    the spec, and the pod's GPU request, as :func:`parse_pod` gives it."""

    pod: Mapping[str, Any]
    spec: Mapping[str, Any]
    containers: tuple[SpecContainer, ...]
    request: PodRequest


def _pod_fields(pod: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The pod's spec and annotations, checked as far as parsing needs them."""
    if not isinstance(pod, Mapping):
        raise RequestError("pod must be a JSON object")
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise RequestError("pod has no spec")
    metadata = pod.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise RequestError("pod metadata must be a mapping")
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise RequestError("pod metadata.annotations must be a mapping of strings")
    for key in ("initContainers", "containers"):
        if not isinstance(spec.get(key) or [], list):
            raise RequestError(f"spec.{key} must be a list")
    return spec, annotations


def _container(ref: ContainerRef, config: Config, seen: set[str],
               ) -> tuple[str, bool, ContainerRequest | None]:
    """One container's name, whether it names a vgpu resource, and its request; ``seen``
    collects the names met so far."""
    container = ref.container
    if not isinstance(container, Mapping):
        raise RequestError(f"spec.{ref.key}[{ref.position}] must be a mapping")
    label = "init container" if ref.init else "container"
    cname = container.get("name")
    where = f"{label} {cname!r}" if isinstance(cname, str) and cname else (
        f"spec.{ref.key}[{ref.position}]")
    named, request = _parse_container(container, config, init=ref.init, where=where)
    # Every name, not only the GPU containers': two containers of one name would be one
    # to the node agent, and the API server rejects duplicates anyway.
    if str(cname) in seen:
        raise RequestError(f"{where}: container names must be unique in a pod")
    seen.add(str(cname))
    return str(cname), named, request


def parse_pod(pod: Mapping[str, Any], config: Config) -> PodRequest:
    """Parse every GPU container of a pod and its placement annotations.

    Raises :class:`RequestError` with a message naming the container and resource.
    """
    _, annotations = _pod_fields(pod)
    seen: set[str] = set()
    parsed = [request for ref in containers(pod)
              if (request := _container(ref, config, seen)[2]) is not None]
    return PodRequest(containers=tuple(parsed), choices=parse_pod_choices(annotations))


def parse_gpu_pod(pod: Any, config: Config) -> ParsedPod | None:
    """The pod read once, when it names a vgpu resource (:func:`names_gpu_resource`); None
    when it does not, however malformed it is (never raises then).

    Raises :class:`RequestError`, as :func:`parse_pod` would, for a GPU pod that does not
    parse.
    """
    seen: set[str] = set()
    try:
        spec, annotations = _pod_fields(pod)
        read = [(ref, *_container(ref, config, seen)) for ref in containers(pod)]
    except RequestError:
        # Only a broken pod is walked twice: to tell whether it is one to refuse.
        if names_gpu_resource(pod, config):
            raise
        return None
    if not any(named for _, _, named, _ in read):
        return None
    placed = tuple(SpecContainer(ref.key, ref.position, ref.init, name, ref.container, request)
                   for ref, name, _, request in read)
    return ParsedPod(pod, spec, placed, PodRequest(
        containers=tuple(c.request for c in placed if c.request is not None),
        choices=parse_pod_choices(annotations)))
