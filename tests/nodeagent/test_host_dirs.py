"""HAMi-core's host folders (vgpu_nodeagent/isolation/host_dirs.py) against what a tenant
can leave in them: a link planted at the lock folder's name is refused, a link inside a
container's folder is removed, never followed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vgpu_nodeagent.isolation.host_dirs import (
    CacheFolders,
    UnsafeFolder,
    container_user,
    ensure_lock_folder,
    make_container_folder,
)

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="making folders for other users needs root")


def test_the_lock_folder_is_roots_sticky_and_shared(tmp_path: Path) -> None:
    path = Path(ensure_lock_folder(str(tmp_path)))
    info = path.stat()
    assert info.st_mode & 0o7777 == 0o1777 and info.st_uid == os.geteuid()
    # Made again over a folder someone loosened: put back.
    path.chmod(0o777)
    ensure_lock_folder(str(tmp_path))
    assert path.stat().st_mode & 0o7777 == 0o1777


@pytest.mark.parametrize("plant", ["link", "file"])
def test_something_planted_at_the_lock_folders_name_is_refused(tmp_path: Path,
                                                                plant: str) -> None:
    target = tmp_path / "victim"
    target.mkdir()
    (target / "secret").write_text("x")
    if plant == "link":
        (tmp_path / "vgpulock").symlink_to(target)
    else:
        (tmp_path / "vgpulock").write_text("not a folder")
    with pytest.raises(UnsafeFolder, match="refused"):
        ensure_lock_folder(str(tmp_path))
    # Nothing was done through it.
    assert target.stat().st_mode & 0o7777 != 0o1777


@pytest.mark.parametrize(("pod", "user"), [
    ({"spec": {"containers": [{"name": "c"}]}}, (0, 0)),
    ({"spec": {"securityContext": {"runAsUser": 1000, "runAsGroup": 3000},
               "containers": [{"name": "c"}]}}, (1000, 3000)),
    ({"spec": {"securityContext": {"runAsUser": 1000},
               "containers": [{"name": "c", "securityContext": {"runAsUser": 2000}}]}},
     (2000, 0)),
    ({"spec": {"containers": [{"name": "c", "securityContext": {"runAsUser": -1}}]}}, (0, 0)),
    ({"spec": {"containers": [{"name": "c", "securityContext": {"runAsUser": True}}]}},
     (0, 0)),
    ({"spec": "nonsense"}, (0, 0)),
])
def test_a_containers_user_is_its_pod_specs(pod: dict[str, Any], user: tuple[int, int]) -> None:
    assert container_user(pod, "c") == user


@needs_root
def test_a_containers_folder_is_its_users_alone_and_goes_with_its_pod(tmp_path: Path) -> None:
    folders = CacheFolders(str(tmp_path))
    pod = {"metadata": {"uid": "u1"},
           "spec": {"securityContext": {"runAsUser": 1000}, "containers": [{"name": "c"}]}}
    folders.make(pod, "u1", "c", "u1_c")
    path = tmp_path / "containers" / "u1_c"
    info = path.stat()
    assert (info.st_mode & 0o7777, info.st_uid) == (0o700, 1000)
    # What the tenant leaves: files, a folder, a link to something of the host's.
    victim = tmp_path / "host-file"
    victim.write_text("keep")
    (path / "cache").write_text("x")
    (path / "sub").mkdir()
    (path / "sub" / "more").write_text("y")
    (path / "link").symlink_to(victim)
    (path / "sub" / "dirlink").symlink_to(tmp_path)
    for item in (path / "sub", path):
        os.chown(item, 1000, 1000)
        item.chmod(0o700)
    folders.on_pod(pod, None)
    assert not path.exists()
    assert victim.read_text() == "keep" and tmp_path.is_dir()


@needs_root
def test_a_link_planted_at_a_containers_folder_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "containers").mkdir()
    (tmp_path / "containers" / "u1_c").symlink_to(tmp_path)
    with pytest.raises(UnsafeFolder):
        make_container_folder(str(tmp_path), "u1_c", 1000, 1000)
    assert tmp_path.stat().st_uid == os.geteuid()


@needs_root
def test_the_folders_of_pods_gone_unwatched_are_swept(tmp_path: Path) -> None:
    folders = CacheFolders(str(tmp_path))
    for name in ("live_a", "live_b", "gone_a"):
        make_container_folder(str(tmp_path), name, 1000, 1000)
    folders.sweep({"live"})
    assert sorted(os.listdir(tmp_path / "containers")) == ["live_a", "live_b"]


@needs_root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
def test_the_agent_removes_a_tenants_folder_with_chown_alone(tmp_path: Path) -> None:
    """As the manifests run it: root with every capability dropped but CAP_CHOWN (the
    hami-core overlay's), so no CAP_DAC_OVERRIDE to read a tenant's 0700 folder."""
    make_container_folder(str(tmp_path), "u1_c", 1000, 1000)
    path = tmp_path / "containers" / "u1_c"
    (path / "sub").mkdir()
    (path / "sub" / "cache").write_text("x")
    for item in (path / "sub", path / "sub" / "cache", path):
        os.chown(item, 1000, 1000)
    (path / "sub").chmod(0o700)
    script = ("import sys; from vgpu_nodeagent.isolation.host_dirs import "
              "remove_container_folders as r; r(sys.argv[1], ['u1_c'])")
    subprocess.run(["setpriv", "--bounding-set=-all,+chown", sys.executable, "-c", script,
                    str(tmp_path)], check=True, timeout=60)
    assert not path.exists()
