"""The CUDA workload of ``bench/isolation.py``, run in a child process with exactly the
environment an Allocate answer gave (plus what a container runtime would do on a bare
host: CUDA_VISIBLE_DEVICES from NVIDIA_VISIBLE_DEVICES, LD_PRELOAD for ld.so.preload).

    python bench/_isolation_child.py GPUMEM_MIB SECONDS

Prints one JSON object: the memory CUDA reports, whether allocating past GPUMEM_MIB was
refused, and fp16 matmul TFLOP/s. Uses torch, else cupy.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

MIB = 1024 * 1024


def _torch(limit_mib: int, seconds: float) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    free, total = torch.cuda.mem_get_info()
    held = []
    refused = False
    try:
        # Most of the grant first, then a block that crosses it: the 3 GiB + 2 GiB.
        held.append(torch.empty(int(limit_mib * 0.75) * MIB, dtype=torch.uint8, device="cuda"))
        held.append(torch.empty(int(limit_mib * 0.5) * MIB, dtype=torch.uint8, device="cuda"))
    except RuntimeError:  # torch.OutOfMemoryError is a RuntimeError
        refused = True
    del held
    torch.cuda.empty_cache()
    a = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    torch.cuda.synchronize()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        count += 10
    elapsed = time.perf_counter() - start
    return {"library": f"torch {torch.__version__}", "free_mib": free // MIB,
            "total_mib": total // MIB, "past_limit_refused": refused,
            "tflops": round(2 * 8192**3 * count / elapsed / 1e12, 1)}


def _cupy(limit_mib: int, seconds: float) -> dict[str, Any]:
    import cupy  # noqa: PLC0415

    free, total = cupy.cuda.runtime.memGetInfo()
    held = []
    refused = False
    try:
        held.append(cupy.empty(int(limit_mib * 0.75) * MIB, dtype=cupy.uint8))
        held.append(cupy.empty(int(limit_mib * 0.5) * MIB, dtype=cupy.uint8))
    except cupy.cuda.memory.OutOfMemoryError:
        refused = True
    del held
    cupy.get_default_memory_pool().free_all_blocks()
    a = cupy.random.rand(8192, 8192).astype(cupy.float16)
    b = cupy.random.rand(8192, 8192).astype(cupy.float16)
    cupy.cuda.Device().synchronize()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        cupy.cuda.Device().synchronize()
        count += 10
    elapsed = time.perf_counter() - start
    return {"library": f"cupy {cupy.__version__}", "free_mib": free // MIB,
            "total_mib": total // MIB, "past_limit_refused": refused,
            "tflops": round(2 * 8192**3 * count / elapsed / 1e12, 1)}


def main() -> int:
    limit, seconds = int(sys.argv[1]), float(sys.argv[2])
    try:
        import torch  # noqa: F401, PLC0415
        run = _torch
    except ImportError:
        run = _cupy
    try:
        print(json.dumps(run(limit, seconds)))
    except Exception as exc:  # the parent reports it as this backend's result
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
