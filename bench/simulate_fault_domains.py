"""What fault domains cost in packing: the bundled openb trace on MPS nodes, with the pods
spread over tenants and a share of them keeping to their namespace's fault domain
(``vgpu.io/fault-domain: namespace``), against the same replay with none keeping.

    python bench/simulate_fault_domains.py [--policy lowest-task-count] [--seeds 42,43,44]
        [--tenants 10] [--isolated 0.2] [--isolation mps] [--sample FRACTION]

Per seed four replays (``vgpu simulate --isolation mps --tenants N
--fault-domain-isolated SHARE`` is the one that matters): ``baseline`` (no pod keeps to
its namespace), ``isolated``, ``isolated_no_score`` (the same without FaultDomain's score,
to show what it saves) and ``isolated_hami_core`` (the same pods on nodes whose GPUs are
each process's own fault domain: the cost there is nothing). One line per replay; the last
line is one JSON object with the means over the seeds and the cost in percentage points
of GPU left unallocated at 100 % arrived (docs/isolation.md#what-fault-domains-cost).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from _support import sampled

# bench/ holds a scheduler.py of its own; the package must win.
sys.path[0] = str(Path(__file__).resolve().parent.parent)
sys.path.insert(1, str(Path(__file__).resolve().parent))  # bench/_support.py

from vgpu.config import Config  # noqa: E402
from vgpu_simulate import bundled  # noqa: E402
from vgpu_simulate import policies as sim_policies  # noqa: E402
from vgpu_simulate.replay import replay  # noqa: E402
from vgpu_simulate.tenancy import Tenancy  # noqa: E402


@dataclasses.dataclass(frozen=True)
class NoScore(sim_policies.SimPolicy):
    """The policy with FaultDomain's score weighed 0: placement as if it only filtered."""

    def config(self) -> Config:
        base = super().config()
        weights = (*base.scheduler.score_weights, "FaultDomain=0")
        return dataclasses.replace(base, scheduler=dataclasses.replace(
            base.scheduler, score_weights=weights))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default=sim_policies.DEFAULT)
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--isolated", type=float, default=0.2)
    parser.add_argument("--isolation", default="mps")
    parser.add_argument("--sample", type=float, default=1.0,
                        help="replay on this share of the nodes (a smoke run: 0.05)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    nodes, pods = sampled(bundled.nodes(), args.sample), bundled.pods()
    policy = sim_policies.get(args.policy)
    variants = {
        "baseline": (policy, Tenancy(args.tenants, 0.0, args.isolation)),
        "isolated": (policy, Tenancy(args.tenants, args.isolated, args.isolation)),
        "isolated_no_score": (NoScore(**dataclasses.asdict(policy)),
                              Tenancy(args.tenants, args.isolated, args.isolation)),
        "isolated_hami_core": (policy, Tenancy(args.tenants, args.isolated, "hami-core")),
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for seed in seeds:
        for name, (chosen, tenancy) in variants.items():
            r = replay(nodes, pods, chosen, seed=seed, tenancy=tenancy)
            line = {"variant": name, "seed": seed,
                    "unallocated_gpu_pct_at_100": r.unallocated_gpu_pct_at_100,
                    "placed": r.placed, "failed": r.failed,
                    "isolated_pods": r.isolated_pods, "isolated_placed": r.isolated_placed,
                    "seconds": round(r.seconds, 1)}
            runs[name].append(line)
            print(json.dumps(line), flush=True)

    def mean(name: str, key: str) -> float | None:
        values = [r[key] for r in runs[name] if r[key] is not None]
        return round(statistics.mean(values), 2) if values else None

    report: dict[str, Any] = {
        "policy": args.policy, "seeds": seeds, "tenants": args.tenants,
        "isolated_share": args.isolated, "isolation": args.isolation,
        "nodes": len(nodes), "workload": "openb default (bundled), inflated 1.3x"}
    for name in variants:
        report[name] = {key: mean(name, key) for key in (
            "unallocated_gpu_pct_at_100", "placed", "failed", "isolated_pods",
            "isolated_placed")}
    base = report["baseline"]["unallocated_gpu_pct_at_100"]
    for name in ("isolated", "isolated_no_score", "isolated_hami_core"):
        value = report[name]["unallocated_gpu_pct_at_100"]
        report[name]["cost_pp"] = (None if base is None or value is None
                                   else round(value - base, 2))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
