"""Write generated workload variants (:mod:`vgpu_simulate.families`) as pod lists.

    python bench/simulate_generate.py [--out /tmp/vgpu-variants] [--seed 2023] [NAME ...]

With no names: every variant of ``families.GENERATED``. Each goes to
``OUT/openb_pod_list_NAME.csv``, derived from the bundled default trace with a fixed seed,
so the files are the same on every machine (they are not kept in the repository). Replay
one with ``vgpu simulate --pods OUT/openb_pod_list_NAME.csv``, or all of them with
``PODS_DIR=OUT bash bench/simulate_variants.sh``. The last line is one JSON object: per
variant, the shares its name speaks of and the file's SHA-256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

# bench/ holds a scheduler.py of its own; the package must win.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from vgpu_simulate import bundled, families  # noqa: E402
from vgpu_simulate.trace import write_pods  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="/tmp/vgpu-variants")
    parser.add_argument("--seed", type=int, default=families.SEED)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    nodes, pods = bundled.nodes(), bundled.pods()
    report: dict[str, object] = {"seed": args.seed}
    for name in args.names or families.GENERATED:
        derived = families.derive(name, pods, nodes, seed=args.seed)
        target = out / f"openb_pod_list_{name}.csv"
        write_pods(target, derived)
        entry = {**families.describe(derived),
                 "sha256": hashlib.sha256(target.read_bytes()).hexdigest()}
        report[name] = entry
        print(f"{target}: {entry}", file=sys.stderr)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
