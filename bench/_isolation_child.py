"""The CUDA workloads of ``bench/isolation.py``, each run in a child process with exactly
the environment an Allocate answer gave (plus what a container runtime would do on a bare
host: CUDA_VISIBLE_DEVICES from NVIDIA_VISIBLE_DEVICES, LD_PRELOAD for ld.so.preload).

    python bench/_isolation_child.py measure LIMIT_MIB SECONDS [START_EPOCH]
    python bench/_isolation_child.py hold MIB SECONDS
    python bench/_isolation_child.py fault DELAY_SECONDS
    python bench/_isolation_child.py launches SECONDS

- ``measure``: the memory CUDA reports, whether allocating past LIMIT_MIB is refused, then
  fp16 matmul TFLOP/s for SECONDS (from START_EPOCH when given, so that concurrent clients
  time the same window).
- ``hold``: allocates MIB, prints ``{"held_mib": ...}`` at once, keeps it SECONDS.
- ``fault``: after DELAY_SECONDS, a kernel writes through an invalid device address.
- ``launches``: small kernels (256 blocks each) per second for SECONDS: the kind of work
  a limiter that charges launches by their grid size sees most of.

Each prints one JSON object as its last line. ``measure`` and ``hold`` use torch (else
cupy); ``fault`` uses cupy (a raw kernel), else torch's illegal index.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

MIB = 1024 * 1024
N = 8192


def _lib() -> str:
    try:
        import torch  # noqa: F401, PLC0415
    except ImportError:
        return "cupy"
    return "torch"


def _probe_torch(limit_mib: int) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    free, total = torch.cuda.mem_get_info()
    held = []
    refused, within = False, 0
    try:
        # Most of the grant first, then a block that crosses it: 3 GiB + 2 GiB of 4 GiB.
        held.append(torch.empty(int(limit_mib * 0.75) * MIB, dtype=torch.uint8, device="cuda"))
        within = int(limit_mib * 0.75)
        held.append(torch.empty(int(limit_mib * 0.5) * MIB, dtype=torch.uint8, device="cuda"))
    except RuntimeError:  # torch.OutOfMemoryError is a RuntimeError
        refused = True
    del held
    torch.cuda.empty_cache()
    return {"library": f"torch {torch.__version__} (CUDA {torch.version.cuda})",
            "free_mib": free // MIB, "total_mib": total // MIB,
            "allocated_within_mib": within, "past_limit_refused": refused}


def _matmul_torch(seconds: float, start_at: float | None) -> float:
    import torch  # noqa: PLC0415

    a = torch.randn(N, N, dtype=torch.float16, device="cuda")
    b = torch.randn(N, N, dtype=torch.float16, device="cuda")
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        count += 10
    return 2 * N**3 * count / (time.perf_counter() - start) / 1e12


def _probe_cupy(limit_mib: int) -> dict[str, Any]:
    import cupy  # noqa: PLC0415

    free, total = cupy.cuda.runtime.memGetInfo()
    held = []
    refused, within = False, 0
    try:
        held.append(cupy.empty(int(limit_mib * 0.75) * MIB, dtype=cupy.uint8))
        within = int(limit_mib * 0.75)
        held.append(cupy.empty(int(limit_mib * 0.5) * MIB, dtype=cupy.uint8))
    except cupy.cuda.memory.OutOfMemoryError:
        refused = True
    del held
    cupy.get_default_memory_pool().free_all_blocks()
    return {"library": f"cupy {cupy.__version__}", "free_mib": free // MIB,
            "total_mib": total // MIB, "allocated_within_mib": within,
            "past_limit_refused": refused}


def _matmul_cupy(seconds: float, start_at: float | None) -> float:
    import cupy  # noqa: PLC0415

    a = cupy.random.rand(N, N).astype(cupy.float16)
    b = cupy.random.rand(N, N).astype(cupy.float16)
    cupy.cuda.Device().synchronize()
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        cupy.cuda.Device().synchronize()
        count += 10
    return 2 * N**3 * count / (time.perf_counter() - start) / 1e12


def measure(limit_mib: int, seconds: float, start_at: float | None) -> dict[str, Any]:
    if _lib() == "torch":
        out = _probe_torch(limit_mib)
        tflops = _matmul_torch(seconds, start_at)
    else:
        out = _probe_cupy(limit_mib)
        tflops = _matmul_cupy(seconds, start_at)
    out["tflops"] = round(tflops, 1)
    return out


def hold(mib: int, seconds: float) -> dict[str, Any]:
    if _lib() == "torch":
        import torch  # noqa: PLC0415

        block: Any = torch.empty(mib * MIB, dtype=torch.uint8, device="cuda")
        block.fill_(1)
        torch.cuda.synchronize()
    else:
        import cupy  # noqa: PLC0415

        block = cupy.ones(mib * MIB, dtype=cupy.uint8)
        cupy.cuda.Device().synchronize()
    print(json.dumps({"held_mib": mib, "at": time.time()}), flush=True)
    time.sleep(seconds)
    del block
    return {"held_mib": mib, "seconds": seconds}


def fault(delay: float) -> dict[str, Any]:
    try:
        import cupy  # noqa: PLC0415
    except ImportError:
        cupy = None
    # Context and kernel ready first, so the fault lands at DELAY_SECONDS, not after them.
    if cupy is not None:
        kernel = cupy.RawKernel(
            'extern "C" __global__ void poke(unsigned long long p) '
            '{ *(volatile int *)p = 1; }', "poke")
        kernel((1,), (1,), (cupy.uint64(cupy.zeros(1, dtype=cupy.int32).data.ptr),))
        cupy.cuda.Device().synchronize()
    else:
        import torch  # noqa: PLC0415

        x = torch.zeros(4, device="cuda")
        torch.cuda.synchronize()
    time.sleep(delay)
    started = time.time()
    try:
        if cupy is not None:
            kernel((1,), (1,), (cupy.uint64(0xDEAD0000),))
            cupy.cuda.Device().synchronize()
        else:
            index = torch.tensor([1 << 40], device="cuda")
            x[index] = 1.0
            torch.cuda.synchronize()
    except Exception as exc:  # the fault is the point: report what CUDA said
        return {"faulted": True, "error": f"{type(exc).__name__}: {exc}"[:300],
                "at": started}
    return {"faulted": False, "at": started}


def launches(seconds: float) -> dict[str, Any]:
    if _lib() == "torch":
        import torch  # noqa: PLC0415

        x = torch.ones(256 * 256, device="cuda")
        sync = torch.cuda.synchronize
        step = x.add_
    else:
        import cupy  # noqa: PLC0415

        x = cupy.ones(256 * 256, dtype=cupy.float32)
        sync = cupy.cuda.Device().synchronize

        def step(value: float) -> Any:
            return x.__iadd__(value)
    for _ in range(100):
        step(1.0)
    sync()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            step(1.0)
        sync()
        count += 1000
    return {"launches_per_second": round(count / (time.perf_counter() - start))}


def main() -> int:
    mode = sys.argv[1]
    try:
        if mode == "measure":
            start_at = float(sys.argv[4]) if len(sys.argv) > 4 else None
            result = measure(int(sys.argv[2]), float(sys.argv[3]), start_at)
        elif mode == "hold":
            result = hold(int(sys.argv[2]), float(sys.argv[3]))
        elif mode == "fault":
            result = fault(float(sys.argv[2]))
        elif mode == "launches":
            result = launches(float(sys.argv[2]))
        else:
            result = {"error": f"unknown mode {mode!r}"}
    except Exception as exc:  # the parent reports it as this workload's result
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
