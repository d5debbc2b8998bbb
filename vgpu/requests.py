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

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu import init_resources, shape_memo
from vgpu.annotations import PodChoices, gives_choices, parse_pod_choices
from vgpu.config import Config
from vgpu.container_request import ContainerRequest, parse_values, resources
from vgpu.errors import RequestError
from vgpu.pods import ContainerRef, containers

__all__ = ["ContainerRequest", "ParsedPod", "PodRequest", "SpecContainer",
           "names_gpu_resource", "parse_container", "parse_gpu_pod", "parse_pod"]

#: An init container's resources the webhook moved off it: none.
_NOTHING_MOVED: Mapping[str, Any] = {}


@dataclass(frozen=True)
class PodRequest:
    """All GPU containers of a pod (init containers included), keyed by container name."""

    containers: tuple[ContainerRequest, ...]
    choices: PodChoices
    #: Where vgpu reads the pod otherwise than HAMi, or HAMi ignores a value: the
    #: admission warnings (the choices' notes included).
    notes: tuple[str, ...] = ()

    def by_name(self) -> dict[str, ContainerRequest]:
        return {c.name: c for c in self.containers}

    @property
    def is_gpu_pod(self) -> bool:
        return bool(self.containers)

    @property
    def max_count(self) -> int:
        return max((c.count for c in self.containers), default=0)

    @property
    def before_apps(self) -> frozenset[str]:
        """The GPU init containers that end before the app containers start
        (:mod:`vgpu.init_reuse`)."""
        return frozenset(c.name for c in self.containers if c.runs_before_apps)

    def priorities(self) -> dict[str, int]:
        """The task priority of each container that gave one, by name."""
        return {c.name: c.priority for c in self.containers if c.priority is not None}


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


def parse_container(container: Mapping[str, Any], config: Config, *, init: bool = False,
                    where: str | None = None) -> ContainerRequest | None:
    """Parse one container; ``None`` when it asks for no GPU."""
    return _parse_container(container, config, init=init, where=where, moved=_NOTHING_MOVED,
                            notes=[])[1]


def _parse_container(container: Mapping[str, Any], config: Config, *, init: bool,
                     where: str | None, moved: Mapping[str, Any],
                     notes: list[str]) -> tuple[bool, ContainerRequest | None]:
    """Whether the container names a vgpu resource at all, and its request (None also
    when it asks for no GPU). ``moved``: what the webhook moved off it (init containers).
    Remembered per config by what it reads, with the notes it made."""
    key, name = shape_memo.resources_key(container), container.get("name")
    if key is None or moved or type(name) is not str or not name:
        return _read_container(container, config, init=init, where=where, moved=moved,
                               notes=notes)
    restart = container.get("restartPolicy")
    if type(restart) is not str:
        restart = None

    def read() -> tuple[bool, ContainerRequest | None, tuple[str, ...]]:
        mine: list[str] = []
        named, request = _read_container(container, config, init=init, where=where,
                                         moved=moved, notes=mine)
        return named, request, tuple(mine)

    named, request, said = shape_memo.memo_for(config).through(
        ("container", name, init, where, restart, key), read)
    notes.extend(said)
    return named, request


def _read_container(container: Mapping[str, Any], config: Config, *, init: bool,
                    where: str | None, moved: Mapping[str, Any],
                    notes: list[str]) -> tuple[bool, ContainerRequest | None]:
    name = container.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError(f"{where or 'container'}: every container needs a name")
    where = where or f"container {name!r}"
    limits, requests = resources(container, where)
    for resource in config.resource_names.all():
        if resource in limits or resource in requests or resource in moved:
            break
    else:
        return False, None  # most containers of most pods: not worth five lookups each
    sidecar = init and container.get("restartPolicy") == "Always"
    return True, parse_values(name, (limits, requests, moved), config, init=init,
                              sidecar=sidecar, where=where, notes=notes)


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
               moved: Mapping[str, Mapping[str, Any]],
               notes: list[str]) -> tuple[str, bool, ContainerRequest | None]:
    """One container's name, whether it names a vgpu resource, and its request; ``seen``
    collects the names met so far, ``notes`` what the parse has to say."""
    container = ref.container
    if not isinstance(container, Mapping):
        raise RequestError(f"spec.{ref.key}[{ref.position}] must be a mapping")
    label = "init container" if ref.init else "container"
    cname = container.get("name")
    where = f"{label} {cname!r}" if isinstance(cname, str) and cname else (
        f"spec.{ref.key}[{ref.position}]")
    off = moved.get(str(cname), _NOTHING_MOVED) if ref.init else _NOTHING_MOVED
    named, request = _parse_container(container, config, init=ref.init, where=where,
                                      moved=off, notes=notes)
    # Every name, not only the GPU containers': two containers of one name would be one
    # to the node agent, and the API server rejects duplicates anyway.
    if str(cname) in seen:
        raise RequestError(f"{where}: container names must be unique in a pod")
    seen.add(str(cname))
    return str(cname), named, request


def _request(requests: list[ContainerRequest], annotations: Mapping[str, Any],
             notes: list[str]) -> PodRequest:
    choices = parse_pod_choices(annotations)
    return PodRequest(containers=tuple(requests), choices=choices,
                      notes=(*choices.notes, *notes))


def _plain_key(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> Hashable | None:
    """What :func:`parse_pod` reads of a pod that gives no placement annotation and had
    nothing moved off its init containers, each container plain decoded JSON with a name:
    per container, in start order, its name, its restart policy and its resources (as
    :func:`_parse_container` remembers one); None for any other pod."""
    if init_resources.INIT_RESOURCES in annotations or gives_choices(annotations):
        return None
    parts: list[Hashable] = []
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if type(items) is not list:
            parts.append(())  # the parse skips it too (_pod_fields checked it is empty)
            continue
        these: list[Hashable] = []
        for container in items:
            if type(container) is not dict:
                return None
            name, restart = container.get("name"), container.get("restartPolicy")
            resources = shape_memo.resources_key(container)
            if type(name) is not str or not name or resources is None:
                return None
            these.append((name, restart if type(restart) is str else None, resources))
        parts.append(tuple(these))
    return ("pod request", *parts)


def parse_pod(pod: Mapping[str, Any], config: Config) -> PodRequest:
    """Parse every GPU container of a pod and its placement annotations.

    Raises :class:`RequestError` with a message naming the container and resource.
    """
    spec, annotations = _pod_fields(pod)
    key = _plain_key(spec, annotations)
    if key is None:
        return _parse_pod(pod, annotations, config)
    # The pods of one Deployment read alike: remembered per config (what raises is not).
    return shape_memo.memo_for(config).through(  # type: ignore[no-any-return]
        key, lambda: _parse_pod(pod, annotations, config))


def _parse_pod(pod: Mapping[str, Any], annotations: Mapping[str, Any],
               config: Config) -> PodRequest:
    seen: set[str] = set()
    notes: list[str] = []
    moved = init_resources.decode(annotations)
    parsed = [request for ref in containers(pod)
              if (request := _container(ref, config, seen, moved, notes)[2]) is not None]
    return _request(parsed, annotations, notes)


def parse_gpu_pod(pod: Any, config: Config) -> ParsedPod | None:
    """The pod read once, when it names a vgpu resource (:func:`names_gpu_resource`); None
    when it does not, however malformed it is (never raises then).

    Raises :class:`RequestError`, as :func:`parse_pod` would, for a GPU pod that does not
    parse.
    """
    seen: set[str] = set()
    notes: list[str] = []
    try:
        spec, annotations = _pod_fields(pod)
        moved = init_resources.decode(annotations)
        read = [(ref, *_container(ref, config, seen, moved, notes)) for ref in containers(pod)]
    except RequestError:
        # Only a broken pod is walked twice: to tell whether it is one to refuse.
        if names_gpu_resource(pod, config):
            raise
        return None
    if not any(named for _, _, named, _ in read):
        return None
    placed = tuple(SpecContainer(ref.key, ref.position, ref.init, name, ref.container, request)
                   for ref, name, _, request in read)
    return ParsedPod(pod, spec, placed, _request(
        [c.request for c in placed if c.request is not None], annotations, notes))
