"""What MPS's one user per GPU costs in packing: the bundled openb trace on MPS nodes, each
pod running as one of N uids (``runAsUser``), against the same replay with every pod under
one uid (where MPS keeps nobody apart).

    python bench/simulate_mps_users.py [--policy lowest-task-count] [--seeds 42,43,44]
        [--users 2,5,10,0] [--isolation mps] [--sample FRACTION]

Per seed one replay per entry of ``--users`` (``vgpu simulate --isolation mps --users N``),
and the baseline ``users_1``; ``0`` is pods that state no uid at all, each a user of its
own (an image's USER is invisible to the scheduler). One line per replay; the last line is
one JSON object with the means over the seeds and the cost in percentage points of GPU
left unallocated at 100 % arrived (docs/isolation.md#what-one-user-per-gpu-costs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from _support import sampled

# bench/ holds a scheduler.py of its own; the package must win.
sys.path[0] = str(Path(__file__).resolve().parent.parent)
sys.path.insert(1, str(Path(__file__).resolve().parent))  # bench/_support.py

from vgpu_simulate import bundled  # noqa: E402
from vgpu_simulate import policies as sim_policies  # noqa: E402
from vgpu_simulate.replay import replay  # noqa: E402
from vgpu_simulate.tenancy import Tenancy  # noqa: E402

KEYS = ("unallocated_gpu_pct_at_100", "placed", "failed")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default=sim_policies.DEFAULT)
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--users", default="2,5,10,0",
                        help="uid counts to replay beside the baseline of one (0: none stated)")
    parser.add_argument("--isolation", default="mps")
    parser.add_argument("--sample", type=float, default=1.0,
                        help="replay on this share of the nodes (a smoke run: 0.05)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    counts = [1, *(int(u) for u in args.users.split(",") if int(u) != 1)]
    nodes, pods = sampled(bundled.nodes(), args.sample), bundled.pods()
    policy = sim_policies.get(args.policy)
    runs: dict[str, list[dict[str, Any]]] = {f"users_{n}": [] for n in counts}
    for seed in seeds:
        for n in counts:
            r = replay(nodes, pods, policy, seed=seed,
                       tenancy=Tenancy(mode=args.isolation, users=n))
            line = {"variant": f"users_{n}", "seed": seed,
                    "unallocated_gpu_pct_at_100": r.unallocated_gpu_pct_at_100,
                    "placed": r.placed, "failed": r.failed, "seconds": round(r.seconds, 1)}
            runs[f"users_{n}"].append(line)
            print(json.dumps(line), flush=True)

    def mean(name: str, key: str) -> float | None:
        values = [r[key] for r in runs[name] if r[key] is not None]
        return round(statistics.mean(values), 2) if values else None

    report: dict[str, Any] = {
        "policy": args.policy, "seeds": seeds, "isolation": args.isolation,
        "nodes": len(nodes), "workload": "openb default (bundled), inflated 1.3x"}
    for name in runs:
        report[name] = {key: mean(name, key) for key in KEYS}
    base = report["users_1"]["unallocated_gpu_pct_at_100"]
    for name in runs:
        value = report[name]["unallocated_gpu_pct_at_100"]
        report[name]["cost_pp"] = (None if base is None or value is None
                                   else round(value - base, 2))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
