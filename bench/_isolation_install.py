"""The checks of ``bench/isolation.py`` that the node agent's HAMi-core install and MPS's one
user per GPU added (issue 48): ``installed``, ``mps-hami-core`` and ``users``, with their
targets. Same shape as :mod:`_isolation_checks`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import _isolation_checks as checks
import _isolation_node as nodes


def _host_target() -> str:
    """Where the agent installs the bundle's build: a host path of its own, as the base
    manifests' /var/lib/vgpu/lib/libvgpu.so."""
    return os.path.join(tempfile.mkdtemp(prefix="vgpu-hami-host-"), "lib", "libvgpu.so")


def installed(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """The library as the agent installs it from a bundle (``--hami-bundle``: the image's
    /opt/vgpu/hami-core) at start, checked, and its memory limit through that file."""
    target = _host_target()
    node = nodes.Node("hami-core", gpu, hami_lib=target, hami_bundle=args.hami_bundle)
    try:
        out: dict[str, Any] = {**node.live(), "hami_core_library": node.library()}
        if not out["hami_core_library"]["ok"]:
            return out
        envs = node.grant("installed", args.gpumem, args.gpucores)
        extra = {"CUDA_REDIRECT": target}
        result = nodes.run(nodes.child_env(envs, target, extra), "measure", args.gpumem,
                           args.seconds)
        checks._ratio(result, baseline)
        return {**out, **result, "env": envs | extra}
    finally:
        node.close()


def mps_hami_core(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """MPS's limits with HAMi-core preloaded beside them: the memory CUDA reports (the
    grant as total, by HAMi-core's hooks), the pin and the thread share."""
    library = _host_target() if args.hami_bundle else args.hami_lib
    node = nodes.Node("mps-hami-core", gpu, hami_lib=library, hami_bundle=args.hami_bundle,
                      mps_control=args.mps_control)
    try:
        out: dict[str, Any] = {**node.live(), "hami_core_library": node.library()}
        envs = node.grant("combined", args.gpumem, args.gpucores)
        extra = {"CUDA_REDIRECT": library}
        result = nodes.run(nodes.child_env(envs, library, extra), "measure", args.gpumem,
                           args.seconds)
        checks._ratio(result, baseline)
        return {**out, **result, "env": envs | extra}
    finally:
        node.close()


#: The pods of the ``users`` check, in arrival order: (name, uid).
USERS = (("first", 1000), ("other-user", 2000), ("same-user", 1000))


def users(gpu: str, args: Any, baseline: float) -> dict[str, Any]:
    """Two uids on an MPS node, placed by vgpu's scheduler on the agent's own inventory and
    allocated through the kubelet's path: the second uid is kept off the first's GPU (on a
    one-GPU node it waits, saying why), and the first uid's next pod joins its GPU."""
    node = nodes.Node("mps", gpu, mps_control=args.mps_control)
    try:
        placed = [node.schedule(name, uid, 1024, 20) for name, uid in USERS]
        on_gpu: dict[str, set[int]] = {}
        for p in placed:
            if p["gpu"] is not None:
                on_gpu.setdefault(p["gpu"], set()).add(p["uid"])
        return {**node.live(), "pods": placed,
                "uids_per_gpu": {g: sorted(u) for g, u in on_gpu.items()},
                "gpus_on_node": len(node.agent.inventory().devices)}
    finally:
        node.close()


RUN: dict[str, Callable[[str, Any, float], dict[str, Any]]] = {
    "installed": installed, "mps-hami-core": mps_hami_core, "users": users}


def targets(out: dict[str, Any]) -> dict[str, bool]:
    """The issue's targets, for the checks of this module that ran."""
    found: dict[str, bool] = {}
    if "installed" in out:
        got = out["installed"]
        found["installed_library_checked"] = got.get("hami_core_library", {}).get("ok") is True
        found["installed_past_limit_refused"] = got.get("past_limit_refused") is True
    if "mps-hami-core" in out:
        got = out["mps-hami-core"]
        total = got.get("total_mib")
        # HAMi-core reports the grant as total (it was 4096 of 4096 under hami-core).
        found["mps_hami_core_total_is_the_grant"] = (
            isinstance(total, int) and 0 < total <= out.get("gpumem", 0))
        found["mps_hami_core_past_limit_refused"] = got.get("past_limit_refused") is True
        found["mps_hami_core_throughput_25_to_45_percent"] = checks._between(
            got.get("ratio_vs_unlimited"), 0.25, 0.45)
    if "users" in out:
        got = out["users"]
        pods = {p["pod"]: p for p in got.get("pods", [])}
        apart = all(len(u) == 1 for u in got.get("uids_per_gpu", {}).values())
        first, other = pods.get("first", {}), pods.get("other-user", {})
        kept_off = other.get("gpu") != first.get("gpu") or first.get("gpu") is None
        found["users_one_uid_per_mps_gpu"] = apart and kept_off and bool(first.get("gpu"))
        found["users_same_uid_joins"] = (
            got.get("gpus_on_node", 0) > 1
            or pods.get("same-user", {}).get("gpu") == first.get("gpu"))
    return found
