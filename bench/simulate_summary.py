"""The 10-seed mean table of a bench/simulate_variants.sh run beside the paper's values.

    python bench/simulate_summary.py /tmp/vgpu-sim

Prints a Markdown table of the bundled variants found (the paper's means, then ours), and
one of the generated variants found (no published values: each policy's mean and min-max
over the seeds, and, with both ``fragmentation-aware`` and ``fgd``, the margin and on how
many seeds ours was lower); then one JSON object on the last line.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

# bench/ holds a scheduler.py of its own; the package must win.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from vgpu_simulate import bundled, published  # noqa: E402

OURS, FGD = "fragmentation-aware", "fgd"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _seeds(entry: dict[str, object]) -> list[int]:
    by_seed = entry["by_seed"]
    assert isinstance(by_seed, dict)
    return [int(s) for s in by_seed]


def _bundled_table(ours: dict[str, dict[str, dict[str, object]]], policies: list[str]) -> None:
    paper = published.load()
    baselines = ["random", "dotprod", "clustering", "packing", "bestfit", "fgd"]
    # Fewer seeds than the paper's ten: its FGD over the same seeds is the fair comparison.
    seeds = sorted({s for v in ours.values() for e in v.values() for s in _seeds(e)})
    subset = set(seeds) < set(paper["default"]["fgd"].unallocated_by_seed)
    same = [f"paper fgd, seeds {','.join(map(str, seeds))}"] if subset else []
    head = ["variant", *[f"paper {b}" for b in baselines], *same,
            *[f"ours: {p}" for p in policies]]
    print(_row(head))
    print("|" + "---|" * len(head))
    for variant in bundled.VARIANTS:
        if variant not in ours:
            continue
        row = [variant, *[f"{paper[variant][b].mean:.2f}" for b in baselines]]
        if subset:
            by_seed = paper[variant]["fgd"].unallocated_by_seed
            row.append(f"{statistics.mean(by_seed[s] for s in seeds):.2f}")
        row += [f"{ours[variant][p]['unallocated']:.2f}" if p in ours[variant] else "-"
                for p in policies]
        print(_row(row))


def _generated_table(ours: dict[str, dict[str, dict[str, object]]], names: list[str],
                     policies: list[str]) -> None:
    both = OURS in policies and FGD in policies
    head = ["variant", *policies, *(["ours − FGD", "seeds ours lower"] if both else [])]
    print(_row(head))
    print("|" + "---|" * len(head))
    for variant in names:
        found = ours[variant]
        row = [variant]
        for p in policies:
            entry = found.get(p)
            if entry is None:
                row.append("-")
                continue
            seeds = entry["by_seed"]
            assert isinstance(seeds, dict)
            row.append(f"{entry['unallocated']:.2f} ({min(seeds.values()):.2f}–"
                       f"{max(seeds.values()):.2f})")
        if both and OURS in found and FGD in found:
            a, b = found[OURS]["by_seed"], found[FGD]["by_seed"]
            assert isinstance(a, dict) and isinstance(b, dict)
            common = sorted(set(a) & set(b))
            margin = statistics.mean(a[s] - b[s] for s in common)
            row += [f"{margin:+.2f}", f"{sum(a[s] < b[s] for s in common)}/{len(common)}"]
        print(_row(row))


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/vgpu-sim")
    ours: dict[str, dict[str, dict[str, object]]] = {}
    for path in sorted(folder.glob("*.json")):
        variant, policy = path.name.removesuffix(".json").split(".", 1)
        doc = json.loads(path.read_text())
        runs = doc.get("runs", [doc])  # one seed: the run itself
        by_seed = {r["seed"]: r["unallocated_gpu_pct_at_100"] for r in runs}
        ours.setdefault(variant, {})[policy] = {
            "unallocated": round(statistics.mean(by_seed.values()), 2),
            "seconds": round(statistics.mean(r["seconds"] for r in runs), 2),
            "by_seed": by_seed}
    policies = sorted({p for v in ours.values() for p in v})
    if any(v in ours for v in bundled.VARIANTS):
        _bundled_table(ours, policies)
    generated = [v for v in ours if v not in bundled.VARIANTS]
    if generated:
        print()
        _generated_table(ours, generated, policies)
    paper = published.load()
    print(json.dumps({"ours": ours,
                      "paper": {v: {b: r.mean for b, r in paper[v].items()}
                                for v in ours if v in paper}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
