"""The 10-seed mean table of a bench/simulate_variants.sh run beside the paper's values.

    python bench/simulate_summary.py /tmp/vgpu-sim

Prints a Markdown table, then one JSON object on the last line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# bench/ holds a scheduler.py of its own; the package must win.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from scheduler.simulate import bundled, published  # noqa: E402


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/vgpu-sim")
    paper = published.load()
    ours: dict[str, dict[str, dict[str, float]]] = {}
    for path in sorted(folder.glob("*.json")):
        variant, policy = path.name.removesuffix(".json").split(".", 1)
        doc = json.loads(path.read_text())
        mean = doc["mean"][0]
        ours.setdefault(variant, {})[policy] = {
            "unallocated": mean["unallocated_gpu_pct_at_100"], "seconds": mean["seconds"]}
    policies = sorted({p for v in ours.values() for p in v})
    baselines = ["random", "dotprod", "clustering", "packing", "bestfit", "fgd"]
    head = ["variant", *[f"paper {b}" for b in baselines], *[f"ours: {p}" for p in policies]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for variant in bundled.VARIANTS:
        if variant not in ours:
            continue
        row = [variant, *[f"{paper[variant][b].mean:.2f}" for b in baselines]]
        row += [f"{ours[variant][p]['unallocated']:.2f}" if p in ours[variant] else "-"
                for p in policies]
        print("| " + " | ".join(row) + " |")
    print(json.dumps({"ours": ours,
                      "paper": {v: {b: paper[v][b].mean for b in baselines} for v in ours}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
