"""From ``/proc/<pid>/cgroup`` to the pod and container a process runs in.

The kubelet puts each pod in a cgroup named for its UID and each container in a child
named for its runtime ID; the spelling depends on the cgroup driver and the runtime:

- cgroupfs driver: ``/kubepods/burstable/pod<uid>/<container id>``
  (Guaranteed pods sit directly under ``/kubepods``);
- systemd driver: ``/kubepods.slice/kubepods-burstable.slice/
  kubepods-burstable-pod<uid with _ for ->.slice/<runtime>-<container id>.scope``, the
  runtime prefix being ``cri-containerd``, ``crio`` or ``docker``;
- cgroup v1 lists one line per hierarchy (``12:memory:/kubepods/...``), v2 a single
  ``0::/kubepods...`` line; both name the same path. CRI-O's ``crio-conmon-<id>`` monitor
  is not the container.

Pure: text in, :class:`CgroupRef` or ``None`` (not a pod's process) out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_POD = re.compile(r"pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}"
                  r"[-_][0-9a-fA-F]{12})(?:\.slice)?$")
_SCOPE = re.compile(r"^(?:cri-containerd|crio|docker)-([0-9a-f]{12,64})\.scope$")
_PLAIN = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class CgroupRef:
    pod_uid: str
    container_id: str


def _from_path(path: str) -> CgroupRef | None:
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts[:-1]):
        found = _POD.search(part)
        if found is None:
            continue
        uid = found.group(1).replace("_", "-").lower()
        leaf = parts[i + 1]
        scope = _SCOPE.match(leaf)
        if scope is not None:
            return CgroupRef(uid, scope.group(1))
        if _PLAIN.match(leaf):
            return CgroupRef(uid, leaf)
        return None
    return None


def parse(text: str) -> CgroupRef | None:
    """The pod and container of a process, from its ``/proc/<pid>/cgroup``."""
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3 or "kubepods" not in fields[2]:
            continue
        ref = _from_path(fields[2].strip())
        if ref is not None:
            return ref
    return None


def container_ids(pod: dict[str, object]) -> dict[str, str]:
    """Runtime container ID → container name, from the pod's status (``containerd://…``,
    ``cri-o://…``, ``docker://…``)."""
    status = pod.get("status")
    out: dict[str, str] = {}
    if not isinstance(status, dict):
        return out
    for key in ("containerStatuses", "initContainerStatuses"):
        for item in status.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("containerID"), str):
                out[item["containerID"].partition("://")[2]] = str(item.get("name", ""))
    return out
