"""HAMi-core's library on the node: installed from the agent's image at start, and checked
before any container gets it (docs/isolation-setup.md#the-library-in-the-image).

``nodeagent.hamiCorePath`` is the host path the agent hands to containers (the kubelet
mounts it as ``/usr/local/vgpu/libvgpu.so`` and preloads it). At start the agent:

1. reads the bundle its image carries (``nodeagent.hamiCoreBundle``,
   :mod:`~vgpu_nodeagent.isolation.hami_bundle`) and picks the build for the driver's CUDA
   major (the newest the driver supports);
2. checks that build as read from the image: its checksum is the index's, it is a shared
   object for this machine, and it exports HAMi-core's wrappers (a build without them loads
   and enforces nothing);
3. installs it at ``hamiCorePath`` unless the same bytes are there already: written beside
   it and renamed over it, so a container starting meanwhile maps the old file or the new,
   never half of one, and the running ones keep the file they mapped;
4. reads back what is now at ``hamiCorePath`` and checks it again (checksum and wrappers):
   that file, not the image's, is what containers get.

Without a bundle (an image built without HAMi-core, or ``hamiCoreBundle`` empty), the
library already at ``hamiCorePath`` is the operator's: steps 2 and 4 without a checksum to
compare. Any failed step refuses the library: the node then runs as if it had none, and
says so (``vgpu.nodeagent.isolation`` log, ``vgpu_nodeagent_hami_core_library``,
``/healthz``, the inventory's ``isolation.problem``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
from dataclasses import dataclass

from vgpu import logs
from vgpu.config import Config
from vgpu.errors import LibraryError
from vgpu_nodeagent.isolation import elf_symbols, hami_bundle

_log = logs.get("vgpu.nodeagent.isolation")

#: Where the library came from.
BUNDLE = "bundle"
NODE = "node"


@dataclass(frozen=True)
class Library:
    """The library at ``path`` and whether containers may get it."""

    #: The host path handed to containers; empty: none is configured.
    path: str
    ok: bool
    #: What was checked, or why it was refused.
    detail: str
    source: str = ""
    #: HAMi-core's commit and the CUDA major of the build (a bundle's; None: the operator's).
    ref: str | None = None
    cuda: int | None = None
    sha256: str | None = None

    @property
    def problem(self) -> str | None:
        """Why a configured library is not handed out; None when it is, or none is set."""
        return None if self.ok or not self.path else self.detail


NOT_CONFIGURED = Library("", False, "nodeagent.hamiCorePath is not set")


def host_machine() -> int | None:
    """This machine's ELF ``e_machine``; None on an architecture vgpu is not built for."""
    return elf_symbols.MACHINES.get(platform.machine())


def _write(path: str, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all: a new file beside it, renamed over it."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        # rename replaces a link at ``path`` itself, never what it points to.
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _from_bundle(path: str, bundle: hami_bundle.Bundle, driver_version: int | None,
                 machine: int | None) -> Library:
    build = hami_bundle.choose(bundle, driver_version)
    source = bundle.path(build)
    data = hami_bundle.read_file(source)
    if hami_bundle.sha256(data) != build.sha256:
        raise LibraryError(f"{source} in the image does not match its index's checksum "
                           f"(damaged image?)")
    try:
        hami_bundle.check(data, machine)
    except LibraryError as exc:
        raise LibraryError(f"{source}: {exc}") from None
    current = None
    with contextlib.suppress(LibraryError):
        current = hami_bundle.sha256(hami_bundle.read_file(path))
    if current != build.sha256:
        try:
            _write(path, data)
        except OSError as exc:
            raise LibraryError(f"cannot install {path}: {exc.strerror or exc}; mount the host "
                               f"folder writable at the same path in the agent") from None
        _log.info("installed HAMi-core", path=path, ref=bundle.ref, cuda=build.cuda,
                  replaced=current is not None)
    installed = hami_bundle.read_file(path)
    if hami_bundle.sha256(installed) != build.sha256:
        raise LibraryError(f"{path} changed while it was installed (checksum differs)")
    shared = hami_bundle.check(installed, machine)
    return Library(path, True, f"HAMi-core {bundle.ref[:12]} built for CUDA {build.cuda} "
                   f"(driver {_cuda(driver_version)}), sha256 {build.sha256[:12]}, "
                   f"{len(shared.exported)} functions exported, from the agent's image",
                   BUNDLE, bundle.ref, build.cuda, build.sha256)


def _from_node(path: str, machine: int | None) -> Library:
    if not os.path.isfile(path):
        raise LibraryError(f"{path} is not a file and the agent's image carries no "
                           f"HAMi-core to install there")
    data = hami_bundle.read_file(path)
    shared = hami_bundle.check(data, machine)
    digest = hami_bundle.sha256(data)
    return Library(path, True, f"the node's own library, sha256 {digest[:12]}, "
                   f"{len(shared.exported)} functions exported", NODE, sha256=digest)


def _cuda(version: int | None) -> str:
    return "unknown" if version is None else f"{version // 1000}.{version % 1000 // 10}"


def install(config: Config, driver_version: int | None, *,
            machine: int | None = None) -> Library:
    """Install and check the library ``config`` names; never raises: a refusal is a
    :class:`Library` that is not ``ok``. ``machine`` defaults to this host's."""
    path = config.nodeagent.hami_core_path
    if not path:
        return NOT_CONFIGURED
    machine = machine if machine is not None else host_machine()
    try:
        if not os.path.isabs(path):
            raise LibraryError("nodeagent.hamiCorePath must be an absolute host path")
        folder = config.nodeagent.hami_core_bundle
        bundle = hami_bundle.read(folder) if folder else None
        if bundle is None:
            return _from_node(path, machine)
        return _from_bundle(path, bundle, driver_version, machine)
    except LibraryError as exc:
        return Library(path, False, f"HAMi-core library {path} refused: {exc}")
