"""The real agent over gRPC installing HAMi-core from its bundle at start, refusing a library
that does not check out (the node degraded, and said so in the log's place, /healthz, the
metrics and the inventory), and choosing its mode with ``isolation.mode: auto``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.nodeagent.conftest import DEFAULT_GPUS, GPU1, NODE, envs, gpu, wait_phase, wait_until
from tests.nodeagent.mps_support import mps_settings
from tests.nodeagent.test_agent_isolation import healthz, metrics, small
from tests.support import hami_standin
from tests.support.pods import bind_assigned, container, pod, slices
from vgpu.codecs import decode_inventory
from vgpu.config import from_mapping
from vgpu.node_isolation import PROBLEM_CHARS, NodeIsolation
from vgpu_nodeagent.devices.fake import FakeDiscovery


def discovery(tmp_path: Path, *, driver: int | None = 13000,
              gpus: list[dict[str, Any]] | None = None) -> FakeDiscovery:
    path = tmp_path / "gpus.json"
    body: dict[str, Any] = {"devices": gpus or DEFAULT_GPUS}
    if driver is not None:
        body["cuda_driver_version"] = driver
    path.write_text(json.dumps(body))
    return FakeDiscovery(str(path))


def library_config(tmp_path: Path, bundle: Path, **isolation: Any) -> Any:
    return small(from_mapping({
        "isolation": isolation,
        "nodeagent": {"hamiCorePath": str(tmp_path / "host" / "lib" / "libvgpu.so"),
                      "hamiCoreBundle": str(bundle),
                      "sharedCacheDir": str(tmp_path / "host")}}))


def admit(env: Any, name: str) -> Any:
    env.kubelet.devices().wait_for(lambda d: len(d) == 30)
    bind_assigned(env.cluster, pod(name, [container("main", 1, mem=4096, cores=30)]),
                  NODE, {"main": slices((GPU1, 4096, 30))})
    (response,) = env.kubelet.admit_pod([1])
    wait_phase(env, name, "success")
    return response


def node_isolation(env: Any) -> NodeIsolation | None:
    raw = env.cluster.get("nodes", NODE)["metadata"].get("annotations", {}).get(
        "vgpu.io/node-gpus")
    return decode_inventory(raw).isolation if raw else None


def test_the_agent_installs_its_bundled_library_and_hands_out_that(make_env: Any,
                                                                   tmp_path: Path) -> None:
    bundle = hami_standin.bundle(tmp_path / "bundle")
    config = library_config(tmp_path, bundle)
    env = make_env(config, discovery=discovery(tmp_path))
    env.kubelet.wait_registration()
    installed = Path(config.nodeagent.hami_core_path)
    assert installed.read_bytes() == (bundle / "cuda13" / "libvgpu.so").read_bytes()
    response = admit(env, "p1")
    mounts = {m.container_path: m.host_path for m in response.mounts}
    assert mounts["/usr/local/vgpu/libvgpu.so"] == str(installed)
    assert envs(response)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    wait_until(lambda: node_isolation(env) == NodeIsolation("hami-core"), what="inventory")
    text = metrics(env)
    assert (f'vgpu_nodeagent_hami_core_library{{cuda="13",ref="{hami_standin.REF}",'
            f'source="bundle",state="ok"}} 1.0') in text
    assert "vgpu_nodeagent_isolation_degraded 0.0" in text
    assert "isolation hami-core" in healthz(env)


@pytest.mark.parametrize(("driver", "flags", "why"), [
    (13000, ("-fvisibility=hidden",), "does not export cuInit"),
    (None, (), "the driver's CUDA version is unknown"),
])
def test_a_refused_library_degrades_the_node_and_says_so(make_env: Any, tmp_path: Path,
                                                         driver: int | None,
                                                         flags: tuple[str, ...],
                                                         why: str) -> None:
    bundle = tmp_path / "bundle"
    hami_standin.library(bundle / "cuda13" / "libvgpu.so", *flags)
    (bundle / "index.json").write_text(json.dumps({
        "version": 1, "ref": hami_standin.REF, "builds": [
            {"cuda": 13, "file": "cuda13/libvgpu.so",
             "sha256": hami_standin.sha256(bundle / "cuda13" / "libvgpu.so")}]}))
    config = library_config(tmp_path, bundle)
    env = make_env(config, discovery=discovery(tmp_path, driver=driver))
    env.kubelet.wait_registration()
    live = env.agent.backend.current()
    assert (live.backend, live.mode, live.enforced) == ("hami-core", "none", False)
    assert live.problem is not None and why in live.problem
    # Every pod is still answered, with HAMi-core's environment and no library to preload.
    response = admit(env, "p1")
    assert "/usr/local/vgpu/libvgpu.so" not in {m.container_path for m in response.mounts}
    assert envs(response)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "4096m"
    assert env.cluster.get("pods", "p1", "default")["metadata"]["annotations"][
        "vgpu.io/isolation"] == "none"
    said = live.problem[:PROBLEM_CHARS]  # the inventory carries a sentence or two
    wait_until(lambda: (node_isolation(env) or NodeIsolation("")).problem == said,
               what="the inventory's problem")
    text = metrics(env)
    assert "vgpu_nodeagent_isolation_degraded 1.0" in text
    assert 'state="refused"' in text
    assert why in healthz(env)
    assert not Path(config.nodeagent.hami_core_path).exists()


AUTO_CASES = [
    # (what, (MPS control program works, library, placeByUser, a pre-Volta GPU), mode)
    ("everything", (True, True, True, False), "mps-hami-core"),
    ("MPS without the library", (True, False, True, False), "mps"),
    ("the library without MPS's program", (False, True, True, False), "hami-core"),
    ("the uid rule off: no MPS", (True, True, False, False), "hami-core"),
    ("a Pascal GPU: no MPS limits", (True, True, True, True), "hami-core"),
    ("nothing", (False, False, True, False), "none"),
]


@pytest.mark.parametrize(("node", "mode"), [c[1:] for c in AUTO_CASES],
                         ids=[c[0] for c in AUTO_CASES])
def test_auto_runs_the_strongest_mode_the_node_supports(
        make_env: Any, tmp_path: Path, node: tuple[bool, bool, bool, bool], mode: str) -> None:
    control, library, by_user, pascal = node
    bundle = hami_standin.bundle(tmp_path / "bundle") if library else tmp_path / "none"
    settings = mps_settings(tmp_path, placeByUser=by_user)
    if not control:
        settings["controlCommand"] = str(tmp_path / "nvidia-cuda-mps-control")
    config = library_config(tmp_path, bundle, mode="auto", mps=settings)
    gpus = [gpu("GPU-p", 0, compute_major=6), *DEFAULT_GPUS[1:]] if pascal else None
    env = make_env(config, discovery=discovery(tmp_path, gpus=gpus))
    env.kubelet.wait_registration()
    assert env.agent.backend.choice.mode == mode
    wait_until(lambda: node_isolation(env) == NodeIsolation(mode, auto=True),
               what=f"inventory {mode}")
    assert f"chosen by auto: {mode}" in env.agent.backend.current().detail
