"""Which containers of the in-flight pods this node's agent has answered, on local disk.

The kubelet allocates a pod's GPU containers one Allocate call each and never repeats one
it got an answer for. Allocate names no container: the agent tells a request for the
second container from one for the first by remembering what it served. Kept in memory
only, a restart between two containers would hand the second container the first one's
GPUs (when both have the same device count) and never mark the pod allocated.

The progress lives in a small file in the kubelet's device-plugin folder (a hostPath the
agent already mounts, so it survives the agent's container), written before the answer
leaves, not in a pod annotation: that would cost an API round trip on every Allocate, and
an asynchronous patch could be lost by the very crash it guards against. A rename makes
each write atomic for readers; no fsync, because a process restart keeps the page cache
and a host reboot restarts the kubelet, which allocates every pod anew.

Shape: ``{"version": 1, "pods": {"<pod uid>": ["<container>", ...]}}``; only pods still
in ``bind-phase: allocating`` are kept, so the file stays a few hundred bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Set

from vgpu import logs

_log = logs.get("vgpu.nodeagent.progress")

VERSION = 1
#: The file's name inside the device-plugin folder's ``vgpu`` subfolder: the kubelet
#: clears the folder's sockets when it restarts, and leaves subfolders alone.
FILE = os.path.join("vgpu", "allocations.json")


def path_in(device_plugin_dir: str) -> str:
    return os.path.join(device_plugin_dir, FILE)


class ProgressFile:
    def __init__(self, path: str) -> None:
        self.path = path

    def load(self) -> dict[str, set[str]]:
        """The saved progress; empty (with a warning) when the file is unusable, which
        costs what a restart cost before: the pods in flight may need rescheduling."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            _log.warning("ignoring unreadable allocation progress", path=self.path,
                         error=str(exc))
            return {}
        pods = data.get("pods") if isinstance(data, dict) else None
        if (not isinstance(data, dict) or data.get("version") != VERSION
                or not isinstance(pods, dict)
                or not all(isinstance(v, list) and all(isinstance(c, str) for c in v)
                           for v in pods.values())):
            _log.warning("ignoring allocation progress of an unknown shape", path=self.path)
            return {}
        return {str(uid): set(names) for uid, names in pods.items()}

    def save(self, progress: Mapping[str, Set[str]]) -> None:
        """Write ``progress`` atomically; a failure is logged, not raised: the answer to
        the kubelet matters more than surviving a restart."""
        body = {"version": VERSION,
                "pods": {uid: sorted(names) for uid, names in sorted(progress.items())}}
        tmp = f"{self.path}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(body, handle, separators=(",", ":"))
            os.replace(tmp, self.path)
        except OSError as exc:
            _log.warning("cannot save allocation progress; a restart now would forget it",
                         path=self.path, error=exc.strerror)
