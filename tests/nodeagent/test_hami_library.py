"""HAMi-core's library as the agent installs and checks it: the ELF reader against binutils'
``nm``, the bundle's index, the install path with stand-in libraries compiled by gcc from
tests/support/hami_standin.c, and every refusal (each says why, none raises)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import hami_standin
from vgpu.config import Config, from_mapping
from vgpu.errors import LibraryError
from vgpu_nodeagent.isolation import elf_symbols, hami_bundle, hami_library

X86_64, AARCH64 = elf_symbols.MACHINES["x86_64"], elf_symbols.MACHINES["aarch64"]
MACHINE = hami_library.host_machine()


def nm_functions(path: Path) -> set[str]:
    """What ``nm -D --defined-only`` lists as exported functions (T, W, i)."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return {parts[2].split("@")[0] for parts in (line.split() for line in out.splitlines())
            if len(parts) >= 3 and parts[1] in ("T", "W", "i")}


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is the reference")
@pytest.mark.parametrize("which", ["standin", "libc"])
def test_the_reader_lists_what_nm_lists(which: str, tmp_path: Path) -> None:
    if which == "standin":
        path = hami_standin.library(tmp_path / "libvgpu.so")
    else:
        found = [p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6",
                             "/lib64/libc.so.6") if os.path.exists(p)]
        if not found:
            pytest.skip("no libc.so.6 where expected")
        path = Path(found[0])
    shared = elf_symbols.read(path.read_bytes())
    assert shared.exported == nm_functions(path)
    assert shared.machine == MACHINE


def test_a_release_build_exports_no_wrapper() -> None:
    """-fvisibility=hidden, what HAMi-core's CMakeLists gives every build type but Debug."""
    assert elf_symbols.read(hami_standin.compiled("-fvisibility=hidden")).exported == set()
    with pytest.raises(LibraryError, match="does not export cuInit, cuMemAlloc_v2"):
        hami_bundle.check(hami_standin.compiled("-fvisibility=hidden"), MACHINE)
    with pytest.raises(LibraryError, match=r"does not export cuLaunchKernel \(8 functions"):
        hami_bundle.check(hami_standin.compiled("-DOMIT_cuLaunchKernel"), MACHINE)
    with pytest.raises(LibraryError, match=f"built for ELF machine {MACHINE}, not"):
        hami_bundle.check(hami_standin.compiled(), AARCH64 if MACHINE == X86_64 else X86_64)


@pytest.mark.parametrize(("data", "message"), [
    (b"", "not an ELF file"),
    (b"#!/bin/sh\necho libvgpu\n", "not an ELF file"),
    (b"\x7fELF\x01\x01\x01" + bytes(60), "not a 64-bit ELF file"),
    (b"\x7fELF\x02\x03\x01" + bytes(60), "unknown byte order 3"),
    (b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x02\x00" + bytes(46), "is not a shared object"),
    (b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00" + bytes(46), "no section headers"),
])
def test_what_is_not_a_library_is_refused_plainly(data: bytes, message: str) -> None:
    with pytest.raises(elf_symbols.ElfError, match=message):
        elf_symbols.read(data)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_damaged_library_is_an_elf_error_never_a_crash(data: st.DataObject) -> None:
    """Bytes overwritten or cut anywhere: the reader answers or refuses, nothing else."""
    blob = bytearray(hami_standin.compiled())
    cut = data.draw(st.integers(0, len(blob)))
    for _ in range(data.draw(st.integers(0, 8))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(elf_symbols.ElfError):
        elf_symbols.read(bytes(blob[:cut]))


# -- the bundle ------------------------------------------------------------------------------

def test_the_image_build_step_writes_the_index_and_refuses_a_hidden_build(
        tmp_path: Path) -> None:
    folder = hami_standin.bundle(tmp_path / "bundle")
    index = json.loads((folder / "index.json").read_text())
    assert index["ref"] == hami_standin.REF and [b["cuda"] for b in index["builds"]] == [12, 13]
    assert index["builds"][0]["sha256"] == hami_standin.sha256(folder / "cuda12/libvgpu.so")
    hidden = tmp_path / "hidden"
    hami_standin.library(hidden / "cuda12" / "libvgpu.so", "-fvisibility=hidden")
    assert hami_bundle.main([str(hidden), "--ref", hami_standin.REF]) == 1
    assert not (hidden / "index.json").exists()
    assert hami_bundle.main([str(folder), "--ref", "v2.6.0"]) == 1  # a tag is not a commit


@pytest.mark.parametrize(("driver", "cuda"), [(12040, 12), (12090, 12), (13000, 13),
                                              (14020, 13)])
def test_the_build_for_the_driver_is_the_newest_it_runs(driver: int, cuda: int,
                                                        tmp_path: Path) -> None:
    bundle = hami_bundle.read(str(hami_standin.bundle(tmp_path)))
    assert bundle is not None and hami_bundle.choose(bundle, driver).cuda == cuda


# -- the install -----------------------------------------------------------------------------

def config_for(tmp_path: Path, bundle: Path | str | None, target: str | None = None) -> Config:
    return from_mapping({"nodeagent": {
        "hamiCorePath": target if target is not None else str(tmp_path / "host" / "libvgpu.so"),
        "hamiCoreBundle": "" if bundle is None else str(bundle)}})


def test_install_puts_the_drivers_build_on_the_host_checked(tmp_path: Path) -> None:
    bundle = hami_standin.bundle(tmp_path / "bundle")
    config = config_for(tmp_path, bundle)
    target = Path(config.nodeagent.hami_core_path)
    library = hami_library.install(config, 12040)
    assert library.ok, library.detail
    assert (library.source, library.ref, library.cuda) == ("bundle", hami_standin.REF, 12)
    assert target.read_bytes() == (bundle / "cuda12" / "libvgpu.so").read_bytes()
    assert library.sha256 == hami_standin.sha256(target)
    assert target.stat().st_mode & 0o777 == 0o644
    assert "built for CUDA 12 (driver 12.4)" in library.detail
    # Started again with the same bytes there: nothing is written (running containers keep
    # the very file they mapped).
    inode = target.stat().st_ino
    assert hami_library.install(config, 12040).ok and target.stat().st_ino == inode
    # A driver upgrade to CUDA 13: the other build, by a rename over the old file.
    assert hami_library.install(config, 13000).cuda == 13
    assert target.stat().st_ino != inode
    assert target.read_bytes() == (bundle / "cuda13" / "libvgpu.so").read_bytes()
    assert [p.name for p in target.parent.iterdir()] == ["libvgpu.so"]  # no temporary left


def test_install_replaces_a_link_not_what_it_points_to(tmp_path: Path) -> None:
    bundle = hami_standin.bundle(tmp_path / "bundle")
    config = config_for(tmp_path, bundle)
    target = Path(config.nodeagent.hami_core_path)
    target.parent.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"someone else's file")
    target.symlink_to(elsewhere)
    assert hami_library.install(config, 13000).ok
    assert not target.is_symlink() and elsewhere.read_bytes() == b"someone else's file"


def _tamper(bundle: Path) -> None:
    (bundle / "cuda13" / "libvgpu.so").write_bytes(hami_standin.compiled(tag="other"))


def _hide(bundle: Path) -> None:
    """A Release build in the image, its checksum in the index (so only the wrappers tell)."""
    path = bundle / "cuda13" / "libvgpu.so"
    path.write_bytes(hami_standin.compiled("-fvisibility=hidden"))
    index = json.loads((bundle / "index.json").read_text())
    index["builds"][1]["sha256"] = hami_standin.sha256(path)
    (bundle / "index.json").write_text(json.dumps(index))


def _index(**change: object) -> object:
    def edit(bundle: Path) -> None:
        index = json.loads((bundle / "index.json").read_text())
        index.update(change)
        (bundle / "index.json").write_text(json.dumps(index))
    return edit


REFUSALS = [
    ("driver unknown", None, None, "the driver's CUDA version is unknown"),
    ("driver too old", 11080, None, "the driver supports CUDA 11, the bundle has builds for "
                                    "CUDA 12, 13 only"),
    ("damaged image", 13000, _tamper, "does not match its index's checksum"),
    ("release build", 13000, _hide, "does not export cuInit"),
    ("index not JSON", 13000, lambda b: (b / "index.json").write_text("{"), "is not JSON"),
    ("index without a commit", 13000, _index(ref="main"), "ref must be HAMi-core's full commit"),
    ("a build outside the bundle", 13000,
     _index(builds=[{"cuda": 13, "file": "../../etc/shadow", "sha256": "0" * 64}]),
     "expected a path inside the bundle"),
    ("two builds for one major", 13000,
     _index(builds=[{"cuda": 13, "file": "cuda13/libvgpu.so", "sha256": "0" * 64}] * 2),
     "two builds for one CUDA major"),
]


@pytest.mark.parametrize(("driver", "damage", "message"), [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_refusals_say_why_and_install_nothing(driver: int | None, damage: object,
                                              message: str, tmp_path: Path) -> None:
    bundle = hami_standin.bundle(tmp_path / "bundle")
    if callable(damage):
        damage(bundle)
    config = config_for(tmp_path, bundle)
    library = hami_library.install(config, driver)
    assert not library.ok and message in library.detail, library.detail
    assert library.problem == library.detail
    assert library.detail.startswith(f"HAMi-core library {config.nodeagent.hami_core_path} "
                                     f"refused: ")
    assert not Path(config.nodeagent.hami_core_path).exists()


def test_refusals_of_the_target(tmp_path: Path) -> None:
    bundle = hami_standin.bundle(tmp_path / "bundle")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unwritable = hami_library.install(config_for(tmp_path, bundle, str(blocker / "lib.so")),
                                      13000)
    assert not unwritable.ok and "cannot install" in unwritable.detail
    relative = hami_library.install(config_for(tmp_path, bundle, "lib/libvgpu.so"), 13000)
    assert not relative.ok and "must be an absolute host path" in relative.detail
    other = hami_library.install(config_for(tmp_path, bundle), 13000,
                                 machine=AARCH64 if MACHINE == X86_64 else X86_64)
    assert not other.ok and "built for ELF machine" in other.detail


def test_without_a_bundle_the_nodes_own_library_is_checked(tmp_path: Path) -> None:
    missing = tmp_path / "no-bundle-here"
    config = config_for(tmp_path, missing)
    target = Path(config.nodeagent.hami_core_path)
    absent = hami_library.install(config, 13000)
    assert not absent.ok and "is not a file and the agent's image carries no HAMi-core" in \
        absent.detail
    hami_standin.library(target, "-fvisibility=hidden")
    hidden = hami_library.install(config, 13000)
    assert not hidden.ok and "does not export" in hidden.detail
    hami_standin.library(target)
    own = hami_library.install(config_for(tmp_path, None), None)
    assert own.ok and own.source == "node" and own.sha256 == hami_standin.sha256(target)


def test_no_path_no_library() -> None:
    library = hami_library.install(Config(), 13000)
    assert library == hami_library.NOT_CONFIGURED and library.problem is None
    assert dataclasses.replace(library, path="/x").problem == library.detail
