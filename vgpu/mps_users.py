"""Which Linux user a GPU pod runs as, and who may share an MPS GPU with it
(docs/isolation.md#mps-users).

One MPS control daemon serves one Linux uid at a time per GPU: a client of another uid waits
until every client of the first has ended (25.9 s measured on an H100), or fails with "all
CUDA-capable devices are busy or unavailable". So on a GPU whose mode is an MPS mode
(``mps``, ``mps-hami-core``) vgpu co-locates only pods that run as one user.

A pod's user is its **effective uid**: for each of its GPU containers, the container's
``securityContext.runAsUser``, else the pod's ``securityContext.runAsUser``. The kubelet
starts the container's process with exactly that uid, so it is the uid the MPS daemon sees.
Without either, the image's ``USER`` decides, which the scheduler cannot see: the pod's user
is **unknown**, and it is treated as a user of its own (it shares an MPS GPU with no other
pod). GPU containers that resolve to different uids make the pod **mixed**: its own
containers would stall each other on one MPS GPU, so it goes on no MPS GPU at all.

These fields are the pod owner's to write, and the kubelet holds a process to them at its
start only: a container that runs as root, or may gain privileges (``allowPrivilegeEscalation``
is not false and the image has a setuid binary), can switch to another uid afterwards. Its
CUDA client then waits behind the GPU's clients, and once they have ended it holds the GPU's
MPS server for its new uid: its neighbours' next processes wait on it. Claiming a uid it
does not run as gains it nothing else; the other tenants guard against it with
``vgpu.io/fault-domain`` and an admission rule that pins the uid and forbids escalation
(``isolation.mps.namespaceUsers``, Pod Security's ``restricted`` profile).

Pure: parsing and decisions only; the scheduler's ``MpsUser`` plugin, the webhook and
``vgpu why``/``inspect`` read the same rules.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu import isolation_modes, limits, meta
from vgpu.errors import RequestError
from vgpu.pods import containers

#: The largest uid Kubernetes accepts in ``runAsUser`` (its validation: 0 to 2^31-1).
MAX_UID = limits.UID


def _uid(value: Any) -> int | None:
    """A ``runAsUser`` as Kubernetes validates it; None for anything else (an API server
    refuses such a pod, so only a hand-built object has one)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_UID:
        return None
    return value


def run_as_user(context: Any) -> int | None:
    """A ``securityContext``'s ``runAsUser``; None when it states none (or one no API
    server accepts)."""
    return _uid(meta.mapping(context).get("runAsUser"))


@dataclass(frozen=True, slots=True)
class User:
    """A pod as MPS sees it: the uid its GPU containers run as (None: unknown or mixed,
    then a user of its own), and the pod, which is always the same user as itself."""

    uid: int | None
    pod: str
    #: Why the uid is what it is, for ``vgpu why``.
    source: str = ""
    #: Its GPU containers run as different uids: it fits no MPS GPU.
    mixed: bool = False

    def label(self) -> str:
        if self.mixed:
            return "mixed"
        return "unknown" if self.uid is None else str(self.uid)


def same(a: User, b: User) -> bool:
    """Whether ``a`` and ``b`` may be clients of one MPS GPU at once: one known uid, or one
    pod."""
    return (a.uid is not None and a.uid == b.uid and not (a.mixed or b.mixed)) or (
        bool(a.pod) and a.pod == b.pod)


def effective(pod: Mapping[str, Any], gpu_containers: Collection[str], pod_id: str) -> User:
    """The user of ``pod`` (identified by ``pod_id``) as its GPU containers, named in
    ``gpu_containers``, run. Never raises: a malformed spec reads as unknown."""
    spec = meta.mapping(pod.get("spec"))
    pod_uid = run_as_user(spec.get("securityContext"))
    seen: dict[int, str] = {}
    unknown: list[str] = []
    for ref in containers(pod):
        name = ref.name
        if name is None or name not in gpu_containers:
            continue
        own = run_as_user(meta.mapping(ref.container).get("securityContext"))
        if own is not None:
            seen.setdefault(own, f"container {name}'s securityContext.runAsUser")
        elif pod_uid is not None:
            seen.setdefault(pod_uid, "the pod's securityContext.runAsUser")
        else:
            unknown.append(name)
    if len(seen) > 1:
        listed = ", ".join(str(u) for u in sorted(seen))
        return User(None, pod_id, f"its GPU containers run as different uids ({listed})",
                    mixed=True)
    if unknown or not seen:
        return User(None, pod_id, "unknown: no runAsUser on the pod or its GPU container"
                    f"{'s' if len(unknown) > 1 else ''} ({', '.join(unknown)}); the image's "
                    "USER decides, which vgpu cannot see")
    ((uid, source),) = seen.items()
    return User(uid, pod_id, source)


def held(recorded: int | None, pod: Mapping[str, Any], gpu_containers: Collection[str],
         pod_id: str) -> User:
    """The user of a placed pod: the uid recorded at its placement, else as its spec says
    (a pod placed before users were recorded; ``securityContext`` cannot change once the
    pod exists)."""
    if recorded is not None:
        return User(recorded, pod_id, "recorded at its placement")
    return effective(pod, gpu_containers, pod_id)


def on_mps(reported: str, configured: str) -> bool:
    """Whether a GPU's containers are, or may next be, MPS clients: by the mode its agent
    reports now or the mode its node is configured for (a node configured for MPS whose
    daemon is down reports ``hami-core`` for a while; an ``auto`` node whose choice is not
    known may run MPS). A GPU of an inventory from before modes (``unknown``) is not: its
    agent predates MPS."""
    return (isolation_modes.uses_mps(reported) or isolation_modes.uses_mps(configured)
            or configured == isolation_modes.AUTO)


def blocker(me: User, occupants: Iterable[User]) -> User | None:
    """The first pod among ``occupants`` that ``me`` may not share an MPS GPU with."""
    for other in occupants:
        if not same(me, other):
            return other
    return None


def parse_namespace_users(entries: Iterable[str]) -> dict[str, int]:
    """``<namespace>=<uid>`` entries (``isolation.mps.namespaceUsers``) as a mapping; raises
    :class:`RequestError` naming the entry that is not one."""
    out: dict[str, int] = {}
    for entry in entries:
        namespace, sep, raw = entry.partition("=")
        namespace = namespace.strip()
        text = raw.strip()
        if not sep or not namespace or not text.isdigit() or len(text) > 10:
            raise RequestError(f"{entry!r} is not <namespace>=<uid>")
        uid = int(text)
        if uid > MAX_UID:
            raise RequestError(f"{entry!r}: uid {uid} is above {MAX_UID}")
        if namespace in out:
            raise RequestError(f"namespace {namespace!r} is named twice")
        out[namespace] = uid
    return out
