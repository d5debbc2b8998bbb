"""GPU init containers counted as Kubernetes counts them (docs/contracts.md#init-containers).

An init container (one without ``restartPolicy: Always``) ends before the app containers
start, and the kubelet's device manager hands its devices on: the first app container that
asks for the resource gets the init container's device IDs first. So a pod's GPU use is
not the sum over its containers but, per GPU, the larger of what its init containers took
(the largest of them: they run one after the other) and what its app containers and
sidecars take together, as HAMi counts it (``CollapseInitContainerUsage``) and as
Kubernetes counts every other resource. :func:`footprint` is that rule, for every reader of
an assignment.

Where an init container's slice fits inside the first GPU app container's (no more vGPUs,
no more memory in the same unit, no more cores), the scheduler puts it on that container's
GPUs (:func:`nests`): the kubelet then hands the app container exactly those device IDs,
the pod holds no more than its app containers, and its quota charge is theirs. An init
container that does not fit inside is placed on its own and charged in full.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from vgpu.devices import EMPTY, Usage

if TYPE_CHECKING:
    from vgpu.codecs import GrantedDevice
    from vgpu.requests import ContainerRequest


def first_app(containers: Sequence[ContainerRequest]) -> ContainerRequest | None:
    """The first GPU app container in start order: the one the kubelet hands the init
    containers' device IDs to."""
    return next((c for c in containers if not c.init), None)


def nests(init: ContainerRequest, app: ContainerRequest | None) -> bool:
    """Whether the init container's slices fit inside the app container's, GPU for GPU:
    no more vGPUs, cores and memory (compared only in one unit: MiB with MiB, percent with
    percent, as the GPU they land on is not known yet)."""
    if app is None or not init.runs_before_apps or init.count > app.count:
        return False
    if init.cores > app.cores:
        return False
    if init.memory_mib is not None and app.memory_mib is not None:
        return init.memory_mib <= app.memory_mib
    if init.memory_percent is not None and app.memory_percent is not None:
        return init.memory_percent <= app.memory_percent
    return False


def footprint(containers: Mapping[str, Iterable[GrantedDevice]],
              before_apps: Collection[str]) -> dict[str, Usage]:
    """What a pod holds on each GPU, by uuid: per GPU the larger (memory and cores each) of
    its largest init container's slice and the sum of the others' slices; tasks likewise
    (an init container is one task, and gone once the app containers run).
    ``before_apps``: the names of the init containers that end before the apps start."""
    apps: dict[str, Usage] = {}
    inits: dict[str, Usage] = {}
    for name, slices in containers.items():
        for s in slices:
            if name in before_apps:
                peak = inits.get(s.uuid, EMPTY)
                inits[s.uuid] = Usage(max(peak.memory_mib, s.memory_mib),
                                      max(peak.cores, s.cores), 1)
            else:
                apps[s.uuid] = apps.get(s.uuid, EMPTY).add(s.memory_mib, s.cores)
    for uuid, peak in inits.items():
        app = apps.get(uuid, EMPTY)
        apps[uuid] = Usage(max(app.memory_mib, peak.memory_mib), max(app.cores, peak.cores),
                           max(app.tasks, peak.tasks))
    return apps
