"""The host folders HAMi-core's grants mount into containers, made and removed by the agent
without trusting what is in them.

Under ``nodeagent.sharedCacheDir`` (a host folder only the agent writes):

- ``vgpulock``: HAMi-core's lock folder, mounted at ``/tmp/vgpulock`` in every container it
  serves. Made by the agent, owned by root, ``1777`` with the sticky bit (a tenant can
  create its lock files there, not remove another's), and opened without following a
  link: a link or a file planted at its name is refused, never followed.
- ``containers/<pod uid>_<container>``: one container's shared-cache folder, owned by the
  container's user (``runAsUser``/``runAsGroup`` of the container, else of the pod, else
  root), ``0700``, removed when the pod goes. The container writes there; the agent opens
  nothing in it but by descriptor, without following links, and removes it by taking each
  folder back (owner root) before emptying it: a link a tenant left inside is unlinked,
  never followed.

Creating a folder owned by another user, and taking one back, needs ``CAP_CHOWN``: the
``hami-core`` overlay gives the agent that one capability.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from vgpu import logs
from vgpu_nodeagent.isolation.grants import CONTAINERS, LOCK_FOLDER

_log = logs.get("vgpu.nodeagent.host_dirs")

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFolder(OSError):
    """A name the agent should make a folder at holds something else (a link, a file)."""


@contextlib.contextmanager
def _opened(name: str, dir_fd: int | None = None) -> Iterator[int]:
    try:
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a link; not a folder
            raise UnsafeFolder(exc.errno, f"{name} is not a folder (a link, or a file): "
                                          f"refused") from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def _folder(parent_fd: int, name: str, mode: int, uid: int, gid: int) -> None:
    """Make (or take over) folder ``name`` in ``parent_fd``: owner, group and mode as given."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    # The owner first, by the entry (a folder not ours may not open for reading), then
    # the mode through a descriptor that cannot be a link.
    os.chown(name, uid, gid, dir_fd=parent_fd, follow_symlinks=False)
    with _opened(name, parent_fd) as fd:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode) or (info.st_uid, info.st_gid) != (uid, gid):
            raise UnsafeFolder(1, f"{name} changed while it was made")
        os.fchmod(fd, mode)


def ensure_lock_folder(shared: str) -> str:
    """``<shared>/vgpulock``, root's, 1777; returns its path."""
    os.makedirs(shared, mode=0o755, exist_ok=True)
    with _opened(shared) as parent:
        _folder(parent, LOCK_FOLDER, 0o1777, 0, 0)
    return os.path.join(shared, LOCK_FOLDER)


def container_user(pod: Mapping[str, Any], container: str) -> tuple[int, int]:
    """(uid, gid) a container runs as, as its pod spec says; root where it says nothing
    (the image's own user is not known here)."""
    found = pod.get("spec") if isinstance(pod, Mapping) else None
    spec: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    context = spec.get("securityContext")
    pod_sc: Mapping[str, Any] = context if isinstance(context, Mapping) else {}
    own: Mapping[str, Any] = {}
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            if isinstance(c, Mapping) and c.get("name") == container and \
                    isinstance(c.get("securityContext"), Mapping):
                own = c["securityContext"]

    def pick(field: str) -> int:
        for where in (own, pod_sc):
            value = where.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and \
                    0 <= value < 2**31:
                return value
        return 0

    return pick("runAsUser"), pick("runAsGroup")


def make_container_folder(shared: str, name: str, uid: int, gid: int) -> str:
    """``<shared>/containers/<name>``, owned by ``uid``:``gid``, 0700; returns its path."""
    os.makedirs(os.path.join(shared, CONTAINERS), mode=0o755, exist_ok=True)
    with _opened(os.path.join(shared, CONTAINERS)) as parent:
        _folder(parent, name, 0o700, uid, gid)
    return os.path.join(shared, CONTAINERS, name)


def _empty(fd: int) -> None:
    for entry in os.listdir(fd):
        try:
            info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode):
            _remove_folder(fd, entry)
        else:
            os.unlink(entry, dir_fd=fd)  # a link is removed, never followed


def _remove_folder(parent_fd: int, name: str) -> None:
    # Taken back first: the container's user made it 0700, and the agent reads nothing
    # it does not own (it has no CAP_DAC_OVERRIDE).
    os.chown(name, 0, 0, dir_fd=parent_fd, follow_symlinks=False)
    with _opened(name, parent_fd) as fd:
        os.fchmod(fd, 0o700)
        _empty(fd)
    os.rmdir(name, dir_fd=parent_fd)


def remove_container_folders(shared: str, names: Collection[str]) -> None:
    """Remove the folders of ``names`` (gone ones are skipped); errors are logged."""
    try:
        with _opened(os.path.join(shared, CONTAINERS)) as parent:
            for name in names:
                try:
                    _remove_folder(parent, name)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    _log.warning("cannot remove a container's cache folder", folder=name,
                                 error=exc.strerror or str(exc))
    except FileNotFoundError:
        return


def folders_of(shared: str, pod_uid: str) -> list[str]:
    """The container folders of one pod."""
    try:
        names = os.listdir(os.path.join(shared, CONTAINERS))
    except FileNotFoundError:
        return []
    return [n for n in names if n.startswith(f"{pod_uid}_")]


def orphans(shared: str, live_uids: Collection[str]) -> list[str]:
    """The container folders of pods not among ``live_uids`` (gone while the agent was
    not watching)."""
    try:
        names = os.listdir(os.path.join(shared, CONTAINERS))
    except FileNotFoundError:
        return []
    return [n for n in names if n.partition("_")[0] not in live_uids]


class CacheFolders:
    """The folders of one node's HAMi-core grants under ``shared``, over the pods' lives."""

    def __init__(self, shared: str) -> None:
        self.shared = shared

    def prepare(self) -> str:
        """The lock folder, at start; refuses (``OSError``) what it cannot make safely."""
        return ensure_lock_folder(self.shared)

    def make(self, pod: Mapping[str, Any], pod_uid: str, container: str, name: str) -> None:
        uid, gid = container_user(pod, container)
        try:
            make_container_folder(self.shared, name, uid, gid)
        except OSError as exc:
            # Allocate goes on: the runtime makes a missing mount source (root's, 0755),
            # where HAMi-core then cannot write its cache: the pod's log says so.
            _log.warning("cannot make the container's cache folder", pod_uid=pod_uid,
                         container=container, error=exc.strerror or str(exc))

    def on_pod(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """Remove a deleted pod's folders."""
        if new is not None or old is None:
            return
        uid = (old.get("metadata") or {}).get("uid") if isinstance(old, Mapping) else None
        if isinstance(uid, str) and uid:
            remove_container_folders(self.shared, folders_of(self.shared, uid))

    def sweep(self, live_uids: Collection[str]) -> None:
        """Remove the folders of pods that went while the agent was not watching."""
        remove_container_folders(self.shared, orphans(self.shared, live_uids))
