"""Turn the build stage's Debian root filesystem into the image's base (run as root by
tests/image/build.sh on a copy of the tree mmdebstrap assembled).

The build stage needs the essential set, python3-venv (pip for the install) and binutils
(strip). The running components need python3 and nothing else of it, so the base keeps
what Debian says python3 depends on, plus ``libstdc++6`` (manylinux wheels take it from
the system: numpy, grpc, protobuf and frozenlist cannot load without it), ``dash``
(``/bin/sh``: the Dockerfile's last RUN and the fake-gpus overlay's init container),
``sed`` (that init container too), ``libc-bin`` (``ldconfig`` and ``/etc/ld.so.conf``,
which the NVIDIA container runtime uses to make the driver's libnvml visible to the
agent), ``base-files`` and ``base-passwd``; every other package is purged with
``dpkg --purge``, so ``/var/lib/dpkg/status`` still lists exactly what is in the image
(image scanners read it). What goes: perl, bash, coreutils, util-linux, PAM and login,
debconf, openssl's command and the CA bundle (nothing in vgpu verifies a server against
public CAs: the in-cluster transport trusts the service account's ``ca.crt``), the pip
and setuptools wheels, distutils, lib2to3, binutils.

Packages are purged in three rounds, because their maintainer scripts, and dpkg itself,
call the tools that go too: first everything those scripts do not need, then the tools
but coreutils and diffutils (``rm``, ``diff``: dpkg checks for them before it starts),
then those two with the libraries only they use.

Then, inside kept packages, files no component reads:

- ``gconv``: glibc's iconv modules (8 MB); Python's codecs are its own and UTF-8 and
  ASCII are built into glibc;
- ``pydoc_data`` (the text behind ``help()``) and ``test`` (CPython's test support);
- debconf's cache and dpkg's logs and backups, left by the purges.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

#: What the image runs; the base keeps these and everything they depend on.
KEEP = ("python3", "libstdc++6", "dash", "sed", "libc-bin", "base-files", "base-passwd")
#: What the purged packages' maintainer scripts call, purged after them.
SCRIPT_TOOLS = ("bash", "debconf", "perl-base", "init-system-helpers", "grep", "findutils",
                "diffutils", "coreutils")
#: What dpkg itself needs to run (it checks for them first), purged last.
DPKG_TOOLS = ("diffutils", "coreutils")
#: Files of kept packages that nothing in the image reads, relative to the root.
UNUSED = ("usr/lib/x86_64-linux-gnu/gconv", "usr/lib/python3.11/pydoc_data",
          "usr/lib/python3.11/test", "var/cache/debconf", "var/log/dpkg.log",
          "var/log/alternatives.log", "var/lib/dpkg/status-old",
          "var/lib/dpkg/diversions-old", "var/lib/dpkg/statoverride-old")

_FIELD = re.compile(r"^([\w-]+): (.*)$", re.MULTILINE)


def installed(root: Path) -> dict[str, dict[str, str]]:
    """Every installed package's fields, from ``/var/lib/dpkg/status``."""
    text = (root / "var/lib/dpkg/status").read_text(encoding="utf-8")
    packages = {}
    for stanza in text.split("\n\n"):
        fields = dict(_FIELD.findall(stanza))
        if "Package" in fields and fields.get("Status", "").endswith(" installed"):
            packages[fields["Package"]] = fields
    return packages


def closure(packages: dict[str, dict[str, str]], roots: tuple[str, ...]) -> set[str]:
    """``roots`` and everything they (pre-)depend on, by the installed packages."""
    provided: dict[str, str] = {}
    for name, fields in packages.items():
        for virtual in fields.get("Provides", "").split(","):
            if virtual.strip():
                provided.setdefault(virtual.split()[0], name)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        fields = packages[name]
        for field in ("Pre-Depends", "Depends"):
            for alternatives in filter(str.strip, fields.get(field, "").split(",")):
                for choice in alternatives.split("|"):
                    dep = choice.split()[0].split(":")[0]
                    found = dep if dep in packages else provided.get(dep)
                    if found:
                        todo.append(found)
                        break
    return seen


def purge(root: Path, names: set[str]) -> None:
    if not names:
        return
    subprocess.run(["chroot", str(root), "dpkg", "--purge", "--force-remove-essential",
                    "--force-depends", *sorted(names)], check=True, stdout=subprocess.DEVNULL)


def main(root: Path) -> None:
    packages = installed(root)
    keep = closure(packages, KEEP)
    tools = closure(packages, SCRIPT_TOOLS) - keep
    last = closure(packages, DPKG_TOOLS) - keep
    purge(root, set(packages) - keep - tools)
    purge(root, tools - last)
    purge(root, last)
    left = set(installed(root))
    if left != keep:
        raise SystemExit(f"after the purges, installed != kept: {sorted(left ^ keep)}")
    for relative in UNUSED:
        path = root / relative
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    print(f"base: kept {len(keep)} packages, purged {len(packages) - len(keep)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
