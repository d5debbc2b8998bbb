"""The usage watchdog's rules: who uses how much of which GPU, against what they were given.

Pure. The watchdog (:mod:`vgpu_nodeagent.isolation.watchdog`) reads NVML's running compute
processes and each process's cgroup; here they are summed per container and GPU and judged:

- a *breach*: a container uses more of a GPU than its grant plus ``slack`` MiB;
- a *foreign* process: one on a GPU that no vgpu grant of its container covers: a process
  outside Kubernetes, a pod the vgpu scheduler did not place, or a vgpu container on a GPU
  it was not assigned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vgpu_nodeagent.devices.discovery import GpuProcess


@dataclass(frozen=True)
class Owner:
    """The container a process runs in, and its grants (GPU UUID → MiB; empty: no vgpu
    grant)."""

    pod: str  # namespace/name
    container: str
    grants: Mapping[str, int] = field(default_factory=dict)
    #: The pod's uid: an eviction for the breach names it, not a successor of the name.
    uid: str = ""


@dataclass(frozen=True)
class Use:
    pod: str
    container: str
    uuid: str
    used_mib: int
    granted_mib: int
    uid: str = ""


@dataclass(frozen=True)
class Foreign:
    uuid: str
    pid: int
    used_mib: int
    #: The pod/container it runs in, or None for a process outside Kubernetes.
    owner: str | None


@dataclass(frozen=True)
class Tally:
    uses: tuple[Use, ...]
    breaches: tuple[Use, ...]
    foreign: tuple[Foreign, ...]


def tally(processes: Mapping[str, tuple[GpuProcess, ...]], owners: Mapping[int, Owner | None],
          slack_mib: int = 0) -> Tally:
    used: dict[tuple[str, str, str], int] = {}
    granted: dict[tuple[str, str, str], int] = {}
    uids: dict[tuple[str, str, str], str] = {}
    foreign: list[Foreign] = []
    for uuid, procs in sorted(processes.items()):
        for proc in procs:
            mib = proc.used_mib or 0
            owner = owners.get(proc.pid)
            if owner is None or uuid not in owner.grants:
                where = None if owner is None else f"{owner.pod}/{owner.container}"
                foreign.append(Foreign(uuid, proc.pid, mib, where))
                continue
            key = (owner.pod, owner.container, uuid)
            used[key] = used.get(key, 0) + mib
            granted[key] = owner.grants[uuid]
            uids[key] = owner.uid
    uses = tuple(Use(*key, mib, granted[key], uids[key]) for key, mib in sorted(used.items()))
    breaches = tuple(u for u in uses if u.used_mib > u.granted_mib + slack_mib)
    return Tally(uses, breaches, tuple(foreign))
