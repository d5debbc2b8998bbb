"""The private mount and PID namespaces a real node's daemons run in (and, for a node
with pod networking, a network namespace: :mod:`tests.controlplane.node_network`).

:class:`NodeNamespace` starts ``node_init.py`` as PID 1 of new namespaces (``unshare``)
and hands out the command line that runs a program inside them (``nsenter``). Stopping it
ends every process in there at once, the kernel's rule for a PID namespace whose init
exits: containerd's shims and the containers, which outlive containerd by design, cannot
be left behind. The cgroups runc made for them (``/k8s.io/<container id>``: with
``--cgroups-per-qos=false`` the kubelet names no cgroup parent) are removed afterwards
(:func:`remove_cgroups`); the host keeps no mount, process or kernel setting of the node.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.controlplane.binaries import ControlPlaneError
from tests.controlplane.processes import ChildProcess, wait_until

NODE_INIT = Path(__file__).resolve().parent / "node_init.py"
CGROUP_FS = Path("/sys/fs/cgroup")
#: Fresh tmpfs mounts inside the namespace, hiding the host's.
PRIVATE_DIRS = ("/run", "/var/lib", "/var/log")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ControlPlaneError(f"{name} (util-linux) is needed to run a real node")
    return path


class NodeNamespace:
    def __init__(self, workdir: Path, binds: Mapping[str, Path],
                 sysctls: Mapping[str, str], *, network: bool = False) -> None:
        """``binds``: path inside -> host folder; ``sysctls``: what the kubelet must read;
        ``network``: a network namespace of its own too (else the host's network)."""
        for inside in binds:
            if not any(inside.startswith(d + "/") for d in PRIVATE_DIRS):
                raise ValueError(f"{inside} is not under a private folder {PRIVATE_DIRS}")
        if any(str(workdir).startswith(d + "/") or str(workdir) == d for d in PRIVATE_DIRS):
            raise ControlPlaneError(f"{workdir}: the node's folder must not be under "
                                    f"{PRIVATE_DIRS}, which the namespace hides")
        self.workdir = workdir
        self._binds = dict(binds)
        self._sysctls = dict(sysctls)
        self.network = network
        self._ready = workdir / "namespace.ready"
        self._proc: ChildProcess | None = None
        self.init_pid = 0

    def start(self, timeout: float = 30.0) -> None:
        argv = [_tool("unshare"), "--mount", "--pid", *(["--net"] if self.network else []),
                "--fork", "--mount-proc",
                "--kill-child=SIGKILL", "--", sys.executable, str(NODE_INIT),
                "--ready", str(self._ready), "--sysctl-dir", str(self.workdir / "sysctl")]
        for folder in PRIVATE_DIRS:
            argv += ["--tmpfs", folder]
        for inside, host in self._binds.items():
            host.mkdir(parents=True, exist_ok=True)
            argv += ["--bind", f"{host}:{inside}"]
        for name, value in self._sysctls.items():
            argv += ["--sysctl", f"{name}={value}"]
        # unshare ignores SIGTERM while it waits for its child: only KILL ends it (and
        # then --kill-child ends the namespace) when the test run dies.
        self._proc = ChildProcess("node-namespace", argv, self.workdir / "namespace.log",
                                  pdeathsig="KILL")
        wait_until(self._proc, "the node's namespaces", self._ready.exists, timeout)
        self.init_pid = self._init_pid()

    def _init_pid(self) -> int:
        assert self._proc is not None
        pid = self._proc.popen.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) != 1:
            raise ControlPlaneError(f"unshare ({pid}) has children {children}, expected one")
        return int(children[0])

    def enter(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespaces (nsenter forks it into the PID namespace)."""
        if not self.alive():
            raise ControlPlaneError("the node's namespace is not running")
        return [_tool("nsenter"), f"--target={self.init_pid}", "--mount", "--pid",
                *(["--net"] if self.network else []), "--", *argv]

    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    def members(self) -> list[int]:
        """Every process of the node: those in its PID namespace (the init, and containerd
        and the kubelet, which nsenter forked in) and their descendants (shims and their
        containers, in PID namespaces of their own)."""
        if not self.init_pid:
            return []
        try:
            ours = os.readlink(f"/proc/{self.init_pid}/ns/pid")
        except OSError:
            return []
        parents: dict[int, int] = {}
        found: set[int] = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                namespace = os.readlink(entry / "ns" / "pid")
            except OSError:
                continue  # exited meanwhile
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            pid = int(entry.name)
            parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
            if namespace == ours:
                found.add(pid)
        grew = True
        while grew:
            grew = False
            for pid, ppid in parents.items():
                if ppid in found and pid not in found:
                    found.add(pid)
                    grew = True
        return sorted(found)

    def stop(self) -> None:
        """End the namespace and everything in it."""
        if self._proc is not None:
            self._proc.stop(timeout=10)  # SIGTERM reaches node_init, which exits at once
            self._proc = None


def remove_cgroups(paths: Sequence[str], timeout: float = 10.0) -> list[str]:
    """Remove cgroup folders (``k8s.io/<container id>``) in every hierarchy; the ones
    still there after ``timeout`` (a process in them has not exited yet)."""
    relative = [p.strip("/") for p in paths]
    if any(not p or p == "." or ".." in p.split("/") for p in relative):
        raise ValueError(f"refusing to remove cgroups {paths}")
    hierarchies = sorted(CGROUP_FS.iterdir()) if CGROUP_FS.is_dir() else []
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for hierarchy in hierarchies:
            for path in relative:
                folder = hierarchy / path
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only an empty cgroup goes; runc makes no children
                if folder.exists():
                    left.append(str(folder))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def node_ip() -> str:
    """The machine's address on its default route: a node IP may not be loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # a UDP connect picks the route, sends nothing
            address: str = s.getsockname()[0]
    except OSError as exc:
        raise ControlPlaneError(f"no default route, so no node IP for a kubelet: {exc}") \
            from None
    if address.startswith("127."):
        raise ControlPlaneError(f"the default route's address {address} is loopback")
    return address
