"""The multi-GPU variants on topology-carrying nodes: unallocated GPU and best-link share,
per policy, with the links published and hidden (the scheduler before it knew of links).

    python bench/simulate_topology.py [--variants multigpu30 multigpu50]
        [--shapes mixed nvlink-pairs pcie] [--policies lowest-task-count ...] [--seed 42]

The variants are generated as ``bench/simulate_generate.py`` writes them (fixed seed, the
same lists on every machine). One line per run; the last line is one JSON object: per
variant, shape and policy, ``linked`` and ``hidden``, each with the unallocated-GPU % at
100 % arrived, the multi-GPU pods placed and the share of them that got their node's best
possible link (``vgpu.topology``; ``vgpu simulate --topology``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _support import sampled

# bench/ holds a scheduler.py of its own; the package must win.
sys.path[0] = str(Path(__file__).resolve().parent.parent)
sys.path.insert(1, str(Path(__file__).resolve().parent))  # bench/_support.py

from vgpu_simulate import bundled, families  # noqa: E402
from vgpu_simulate import policies as sim_policies  # noqa: E402
from vgpu_simulate.replay import replay  # noqa: E402

POLICIES = ("lowest-task-count", "binpack", "spread", "fgd", "fragmentation-aware")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", nargs="+", default=["multigpu30", "multigpu50"])
    parser.add_argument("--shapes", nargs="+", default=["mixed", "nvlink-pairs", "pcie"])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--sample", type=float, default=1.0,
                        help="replay on this share of the nodes (a smoke run: 0.05)")
    args = parser.parse_args()
    nodes, base = sampled(bundled.nodes(), args.sample), bundled.pods()
    report: dict[str, Any] = {"seed": args.seed}
    for variant in args.variants:
        pods = families.derive(variant, base, nodes, seed=families.SEED)
        for shape in args.shapes:
            for name in args.policies:
                policy = sim_policies.get(name)
                entry: dict[str, Any] = {}
                for mode, hidden in (("linked", False), ("hidden", True)):
                    r = replay(nodes, pods, policy, seed=args.seed, topology=shape,
                               hide_links=hidden)
                    entry[mode] = {"unallocated_gpu_pct_at_100": r.unallocated_gpu_pct_at_100,
                                   "multi_gpu_pods": r.multi_gpu_pods,
                                   "best_link_pct": r.best_link_pct,
                                   "seconds": round(r.seconds, 1)}
                    print(json.dumps({"variant": variant, "shape": shape, "policy": name,
                                      "mode": mode, **entry[mode]}), flush=True)
                report.setdefault(variant, {}).setdefault(shape, {})[name] = entry
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
