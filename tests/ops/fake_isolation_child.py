"""A stand-in for bench/_isolation_child.py on a machine without a GPU: the same command
line and JSON, figures made from the environment (the MPS thread percentage scales
TFLOP/s; a memory limit in the environment is "enforced")."""

from __future__ import annotations

import json
import os
import sys
import time

BASE_TFLOPS = 600.0


def main() -> int:
    mode = sys.argv[1]
    if mode == "measure":
        limit, seconds = int(sys.argv[2]), float(sys.argv[3])
        if len(sys.argv) > 4:
            time.sleep(max(0.0, float(sys.argv[4]) - time.time()))
        time.sleep(seconds)
        share = int(os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100")) / 100
        limited = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" in os.environ or any(
            k.startswith("CUDA_DEVICE_MEMORY_LIMIT_") for k in os.environ)
        print(json.dumps({"library": "fake", "free_mib": limit if limited else 81000,
                          "total_mib": limit if limited else 81559,
                          "allocated_within_mib": int(limit * 0.75),
                          "past_limit_refused": limited, "tflops": BASE_TFLOPS * share}))
    elif mode == "hold":
        print(json.dumps({"held_mib": int(sys.argv[2]), "at": time.time()}), flush=True)
        time.sleep(float(sys.argv[3]))
        print(json.dumps({"held_mib": int(sys.argv[2])}))
    elif mode == "launches":
        time.sleep(float(sys.argv[2]))
        print(json.dumps({"launches_per_second": 100000}))
    elif mode == "fault":
        time.sleep(float(sys.argv[2]))
        print(json.dumps({"faulted": True, "error": "CUDARuntimeError: illegal address"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
