"""Seconds per seed and peak memory of ``vgpu simulate``, per policy, on the bundled trace.

Each policy runs in its own process (so its peak RSS is its own) for the given seeds; the
last line is one JSON object: per policy the median seconds per seed, the peak RSS and
the mean unallocated share, plus the ratios to the targets (60 s for the default policy,
180 s for ours, 500 MB).

    python bench/simulate.py [--variant default] [--seeds 42] [--policy NAME ...]
                             [--sample FRACTION]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys
from _support import sampled
from vgpu_simulate import bundled, policies, replay
nodes, pods = sampled(bundled.nodes(), float(sys.argv[4])), bundled.pods(sys.argv[1])
out = []
for seed in json.loads(sys.argv[3]):
    r = replay.replay(nodes, pods, policies.get(sys.argv[2]), seed=seed)
    out.append([r.seconds, r.unallocated_gpu_pct_at_100])
print(json.dumps({"runs": out, "rss_mib": replay.peak_rss_mib()}))
"""

TARGET_SECONDS = {"lowest-task-count": 60.0, "fragmentation-aware": 180.0}
TARGET_RSS_MIB = 500 * 1000 * 1000 / (1024 * 1024)


def _env() -> dict[str, str]:
    """The children import the repository's packages and bench/_support.py."""
    here = Path(__file__).resolve().parent
    paths = [str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="default")
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--policy", action="append")
    parser.add_argument("--sample", type=float, default=1.0,
                        help="replay on this share of the nodes (a smoke run: 0.05)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    names = args.policy or ["lowest-task-count", "fgd", "fragmentation-aware"]
    result: dict[str, object] = {"variant": args.variant, "seeds": seeds}
    for name in names:
        done = subprocess.run([sys.executable, "-c", CHILD, args.variant, name,
                               json.dumps(seeds), str(args.sample)], capture_output=True,
                              text=True, check=True, env=_env())
        child = json.loads(done.stdout.strip().splitlines()[-1])
        secs = [r[0] for r in child["runs"]]
        unalloc = [r[1] for r in child["runs"] if r[1] is not None]
        entry = {"seconds_per_seed_median": round(statistics.median(secs), 2),
                 "rss_mib": round(child["rss_mib"], 1),
                 "unallocated_pct_mean": round(statistics.mean(unalloc), 2) if unalloc else None,
                 "rss_vs_500MB": round(child["rss_mib"] / TARGET_RSS_MIB, 3)}
        if name in TARGET_SECONDS:
            entry["seconds_vs_target"] = round(statistics.median(secs) / TARGET_SECONDS[name], 3)
        result[name] = entry
        print(f"{name}: {entry}", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
