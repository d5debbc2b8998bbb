"""Does a slice hold? A GPU check anyone with an NVIDIA GPU can run, no cluster needed.

    python bench/isolation.py [--gpumem 4096] [--gpucores 30] [--seconds 5]
                              [--hami-lib /path/to/libvgpu.so] [--hami-bundle DIR]
                              [--checks mps,pair,fault,restart,watchdog,hami-core,
                                        installed,mps-hami-core,users]

Every check runs the real node agent on NVML with an in-memory cluster and the kubelet
stand-in (bench/_isolation_node.py), which starts the backend for real (the MPS control
daemon on a temporary pipe folder, through ``isolation.mps.controlCommand``), binds pods as
the scheduler would and takes each Allocate answer through the kubelet's path. Child
processes then run CUDA workloads (torch, else cupy) with exactly those environments, plus
what a container runtime does on a bare host (CUDA_VISIBLE_DEVICES from
NVIDIA_VISIBLE_DEVICES; LD_PRELOAD and CUDA_REDIRECT for HAMi-core's mounted library).

- ``unlimited`` (always): a child with no limit, the baseline.
- ``mps``: one client at ``gpumem``/``gpucores``: memory seen, past-the-grant refused,
  TFLOP/s against the baseline (target: 25-45 % at 30 cores).
- ``pair``: two pods' answers at once (50 cores each; 4096 and 8192 MiB) running
  together: each cap holds, the split is even.
- ``fault``: two clients, one writes through an invalid address: what the other sees, and
  whether the daemon and a new client still work afterwards.
- ``restart``: the agent replaced while a client runs: the new agent adopts the daemon
  (no new start) and the client finishes.
- ``watchdog``: two processes, one above its grant and one within, attributed to pods
  (their cgroup files written as the kubelet's would read): the watchdog on real NVML
  reports the breach, and only it, within one interval.
- ``hami-core`` (with ``--hami-lib``): memory seen, past-the-grant refused, TFLOP/s at
  ``gpucores`` with the default core policy and with ``GPU_CORE_UTILIZATION_POLICY=force``.
- ``installed`` (with ``--hami-bundle``, a folder laid out as the image's
  ``/opt/vgpu/hami-core``): the agent installs the build for this driver at start, checks
  it, and a container's memory limit holds through the installed file.
- ``mps-hami-core`` (with ``--hami-lib`` or ``--hami-bundle``): MPS's answer with HAMi-core
  preloaded: the memory CUDA reports (the grant as total?), the pin, the thread share.
- ``users``: pods of two uids on the MPS node, placed by vgpu's scheduler on the agent's
  inventory and allocated: the second uid kept off the first's GPU, the first's next pod
  joining it.

The last line is one JSON object. Without a GPU, the NVIDIA driver, MPS or a CUDA library
it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _isolation_checks as checks
import _isolation_install as install

CHECKS = ("mps", "pair", "fault", "restart", "watchdog", "hami-core", "installed",
          "mps-hami-core", "users")


class Unavailable(Exception):
    """What this machine lacks for the check."""


def preflight(args: argparse.Namespace) -> Any:
    from vgpu.errors import DiscoveryError  # noqa: PLC0415
    from vgpu_nodeagent.devices.nvml import NvmlDiscovery  # noqa: PLC0415

    try:
        discovery = NvmlDiscovery()
    except DiscoveryError as exc:
        raise Unavailable(f"no NVIDIA GPU to check: {exc}") from None
    try:
        if not discovery.devices():
            raise Unavailable("NVML lists no GPU on this machine")
        control = shlex.split(args.mps_control)
        wants_mps = any(c in args.checks for c in ("mps", "pair", "fault", "restart",
                                                   "mps-hami-core", "users"))
        if wants_mps and (not control or shutil.which(control[0]) is None):
            raise Unavailable(f"{args.mps_control!r} is not on PATH (the NVIDIA driver's MPS "
                              "utilities; or leave the MPS checks out with --checks)")
        for name in ("torch", "cupy"):
            try:
                __import__(name)
                break
            except ImportError:
                continue
        else:
            raise Unavailable("neither torch nor cupy is installed: pip install torch (or "
                              "cupy)")
        if args.hami_lib is not None and not os.path.isfile(args.hami_lib):
            raise Unavailable(f"--hami-lib {args.hami_lib}: not a file")
    except Unavailable:
        discovery.close()
        raise
    return discovery


def versions(nvml: Any) -> dict[str, Any]:
    """The driver and the CUDA version it supports, as NVML says."""
    out: dict[str, Any] = {}
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        out["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
        cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
        out["cuda_driver"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
    except Exception as exc:  # versions are a label, not a result
        out["versions_error"] = str(exc)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpumem", type=int, default=4096)
    parser.add_argument("--gpucores", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--hami-lib", metavar="PATH")
    parser.add_argument("--hami-bundle", metavar="DIR",
                        help="HAMi-core builds with their index.json, as the image's "
                             "/opt/vgpu/hami-core (the installed check)")
    parser.add_argument("--mps-control", default="nvidia-cuda-mps-control",
                        help="the MPS control command (isolation.mps.controlCommand)")
    parser.add_argument("--settle", type=float, default=15.0,
                        help="seconds given to concurrent clients' CUDA start-up before "
                             "their common timed window opens")
    parser.add_argument("--checks", default="mps",
                        help=f"comma-separated, of {','.join(CHECKS)} (default: mps; "
                             "hami-core is added by --hami-lib)")
    args = parser.parse_args(argv)
    chosen = [c.strip() for c in args.checks.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown:
        parser.error(f"--checks: unknown {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    if args.hami_lib and "hami-core" not in chosen:
        chosen.append("hami-core")
    if "hami-core" in chosen and not args.hami_lib:
        parser.error("--checks hami-core needs --hami-lib PATH")
    if "installed" in chosen and not args.hami_bundle:
        parser.error("--checks installed needs --hami-bundle DIR")
    if "mps-hami-core" in chosen and not (args.hami_lib or args.hami_bundle):
        parser.error("--checks mps-hami-core needs --hami-lib PATH or --hami-bundle DIR")
    args.checks = chosen
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from vgpu import logs  # noqa: PLC0415

    logs.setup()
    try:
        discovery = preflight(args)
    except Unavailable as exc:
        print(f"bench/isolation.py: {exc}", file=sys.stderr)
        print(json.dumps({"error": str(exc)}))
        return 2
    gpu = discovery.devices()[0]
    import pynvml  # noqa: PLC0415  (NvmlDiscovery loaded it)

    out: dict[str, Any] = {"gpu": gpu.model, "gpu_memory_mib": gpu.memory_mib,
                           **versions(pynvml), "gpumem": args.gpumem,
                           "gpucores": args.gpucores, "seconds": args.seconds}
    discovery.close()
    started = time.monotonic()
    out["unlimited"] = base = checks.unlimited(gpu.uuid, args)
    tflops = base.get("tflops")
    baseline = tflops if isinstance(tflops, float) else 0.0
    for name in args.checks:
        began = time.monotonic()
        try:
            out[name] = {**checks.RUN, **install.RUN}[name](gpu.uuid, args, baseline)
        except Exception as exc:  # one failed check must not hide the others' figures
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        out[name]["check_seconds"] = round(time.monotonic() - began, 1)
        print(f"bench/isolation.py: {name}: {json.dumps(out[name])}", file=sys.stderr,
              flush=True)
    out["targets"] = checks.targets(out) | install.targets(out)
    out["total_seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
