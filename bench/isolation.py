"""Does a slice hold? A GPU check anyone with an NVIDIA GPU can run, no cluster needed.

    python bench/isolation.py [--gpumem 4096] [--gpucores 30] [--seconds 5]
                              [--hami-lib /path/to/libvgpu.so]

For each backend (``mps``; ``hami-core`` too with ``--hami-lib``) it runs the real node
agent on NVML with an in-memory cluster and the kubelet stand-in (tests/support), which
starts that backend for real (the MPS control daemon on a temporary pipe folder), binds a
pod asking for ``gpumem``/``gpucores`` on GPU 0 as the scheduler would, and takes the
Allocate answer through the normal path (GetPreferredAllocation, Allocate). A child
process then runs a CUDA workload (torch, else cupy) with exactly that environment, plus
what a container runtime would do on a bare host (CUDA_VISIBLE_DEVICES from
NVIDIA_VISIBLE_DEVICES; LD_PRELOAD for HAMi-core's ld.so.preload). A baseline child runs
with no limits. The last line is one JSON object: per backend the memory CUDA reports,
whether allocating past the grant was refused, and fp16 matmul TFLOP/s against the
baseline. Targets (issue 13): refused; throughput at gpucores 30 within 25-45 % of
unlimited.

Without a GPU, the NVIDIA driver, MPS or a CUDA library it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_isolation_child.py")


class Unavailable(Exception):
    """What this machine lacks for the check."""


def preflight(hami_lib: str | None) -> Any:
    from vgpu.errors import DiscoveryError  # noqa: PLC0415
    from vgpu_nodeagent.devices.nvml import NvmlDiscovery  # noqa: PLC0415

    try:
        discovery = NvmlDiscovery()
    except DiscoveryError as exc:
        raise Unavailable(f"no NVIDIA GPU to check: {exc}") from None
    if not discovery.devices():
        discovery.close()
        raise Unavailable("NVML lists no GPU on this machine")
    if shutil.which("nvidia-cuda-mps-control") is None:
        discovery.close()
        raise Unavailable("nvidia-cuda-mps-control is not on PATH (the NVIDIA driver's MPS "
                          "utilities)")
    found = False
    for name in ("torch", "cupy"):
        try:
            __import__(name)
            found = True
            break
        except ImportError:
            continue
    if not found:
        discovery.close()
        raise Unavailable("neither torch nor cupy is installed: pip install torch (or cupy)")
    if hami_lib is not None and not os.path.isfile(hami_lib):
        discovery.close()
        raise Unavailable(f"--hami-lib {hami_lib}: not a file")
    return discovery


def child(envs: dict[str, str], gpumem: int, seconds: float, preload: str | None) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_MPS", "CUDA_DEV"))}
    env.update(envs)
    env["CUDA_VISIBLE_DEVICES"] = envs["NVIDIA_VISIBLE_DEVICES"]
    if preload:
        env["LD_PRELOAD"] = preload
    done = subprocess.run([sys.executable, CHILD, str(gpumem), str(seconds)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}


def allocate(mode: str, uuid: str, args: argparse.Namespace, root: str) -> tuple[Any, Any]:
    """Start the agent in ``mode``; the Allocate answer for one pod, and the agent."""
    from tests.support.kubelet import KubeletStandIn  # noqa: PLC0415
    from tests.support.pods import bind_assigned, container, pod, slices  # noqa: PLC0415
    from vgpu.cluster.memory import MemoryCluster  # noqa: PLC0415
    from vgpu.config import from_mapping  # noqa: PLC0415
    from vgpu_nodeagent.agent import NodeAgent  # noqa: PLC0415
    from vgpu_nodeagent.devices.nvml import NvmlDiscovery  # noqa: PLC0415
    from vgpu_nodeagent.options import Options  # noqa: PLC0415

    folder = tempfile.mkdtemp(prefix="vi", dir="/tmp")  # a short path for unix sockets
    config = from_mapping({
        "isolation": {"mode": mode, "watchdog": {"intervalSeconds": 0},
                      "mps": {"pipeDir": os.path.join(root, "pipe"),
                              "logDir": os.path.join(root, "log")}},
        "nodeagent": {"devicePluginDir": folder, "podResourcesSocket": "",
                      "hamiCorePath": args.hami_lib if mode == "hami-core" else "",
                      "sharedCacheDir": os.path.join(root, "cache")}})
    cluster = MemoryCluster()
    cluster.create("nodes", {"metadata": {"name": "bench"}})
    kubelet = KubeletStandIn(folder)
    kubelet.start()
    agent = NodeAgent(config, NvmlDiscovery(), cluster, Options(node_name="bench"))
    agent.start()
    kubelet.wait_registration()
    kubelet.devices().wait_for(lambda d: len(d) > 0)
    bind_assigned(cluster, pod("bench", [container("main", 1, mem=args.gpumem,
                                                   cores=args.gpucores)]),
                  "bench", {"main": slices((uuid, args.gpumem, args.gpucores))})
    (response,) = kubelet.admit_pod([1])
    kubelet.stop()
    return response, agent


def run_backend(mode: str, uuid: str, args: argparse.Namespace, baseline: float) -> Any:
    root = tempfile.mkdtemp(prefix=f"vgpu-isolation-{mode}-")
    response, agent = allocate(mode, uuid, args, root)
    try:
        live = agent.backend.current()
        envs = dict(response.envs)
        preload = args.hami_lib if mode == "hami-core" else None
        result = child(envs, args.gpumem, args.seconds, preload)
        result.update({"mode": live.mode, "enforced_by_agent": live.enforced,
                       "problem": live.problem, "env": envs})
        if isinstance(result.get("tflops"), float) and baseline:
            result["ratio_vs_unlimited"] = round(result["tflops"] / baseline, 3)
        return result
    finally:
        if agent.backend.daemon is not None:
            agent.backend.daemon.command("quit")  # this check started it
        agent.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpumem", type=int, default=4096)
    parser.add_argument("--gpucores", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--hami-lib", metavar="PATH")
    args = parser.parse_args()
    from vgpu import logs  # noqa: PLC0415

    logs.setup()
    try:
        discovery = preflight(args.hami_lib)
    except Unavailable as exc:
        print(f"bench/isolation.py: {exc}", file=sys.stderr)
        print(json.dumps({"error": str(exc)}))
        return 2
    gpu = discovery.devices()[0]
    discovery.close()
    base = child({"NVIDIA_VISIBLE_DEVICES": gpu.uuid}, args.gpumem, args.seconds, None)
    out: dict[str, Any] = {"gpu": gpu.model, "gpu_memory_mib": gpu.memory_mib,
                           "gpumem": args.gpumem, "gpucores": args.gpucores,
                           "unlimited": base}
    baseline = base.get("tflops") if isinstance(base.get("tflops"), float) else 0.0
    out["mps"] = mps = run_backend("mps", gpu.uuid, args, baseline)
    ratio = mps.get("ratio_vs_unlimited")
    out["targets"] = {"past_limit_refused": mps.get("past_limit_refused") is True,
                      "throughput_25_to_45_percent": isinstance(ratio, float)
                      and 0.25 <= ratio <= 0.45}
    if args.hami_lib:
        out["hami-core"] = run_backend("hami-core", gpu.uuid, args, baseline)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
