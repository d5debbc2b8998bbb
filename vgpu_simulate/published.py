"""The FGD paper's published results, for the comparison table and plot.

``data/published.json`` is derived from the artifact's ``analysis_allo_discrete.csv``
(``expected_results`` in the simulator repository) by :func:`from_csv`: per workload and
policy, the unallocated GPU share at arrived = 100 % for each seed, and the mean
allocation curve over seeds. It is regenerated with

    python -m vgpu_simulate.published analysis_allo_discrete.csv \
        > vgpu_simulate/data/published.json
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

#: The artifact's policy directory names and ours.
POLICY_NAMES: Mapping[str, str] = {
    "01-Random": "random",
    "02-DotProd": "dotprod",
    "03-GpuClustering": "clustering",
    "04-GpuPacking": "packing",
    "05-BestFit": "bestfit",
    "06-FGD": "fgd",
}


@dataclass(frozen=True)
class Published:
    workload: str  # e.g. "default", "gpushare40"
    policy: str  # our name, e.g. "fgd"
    unallocated_by_seed: Mapping[int, float]
    curve: tuple[tuple[int, float], ...]  # mean allocated % by arrived %

    @property
    def mean(self) -> float:
        values = list(self.unallocated_by_seed.values())
        return round(sum(values) / len(values), 2)


def workload_name(pod_file: str) -> str:
    """``openb_pod_list_gpushare40.csv.gz`` → ``gpushare40``."""
    name = Path(pod_file).name
    for suffix in (".gz", ".csv"):
        name = name.removesuffix(suffix)
    return name.removeprefix("openb_pod_list_")


def from_csv(path: str | Path) -> dict[str, Any]:
    """The JSON document :func:`load` reads, built from the artifact's CSV."""
    per: dict[tuple[str, str], dict[str, Any]] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            workload = workload_name(row["workload"])
            policy = POLICY_NAMES.get(row["sc_policy"])
            if policy is None:
                continue
            entry = per.setdefault((workload, policy), {"seeds": {}, "curves": []})
            entry["seeds"][row["seed"]] = round(100.0 - float(row["100"]), 4)
            entry["curves"].append({int(k): float(v) for k, v in row.items()
                                    if k.isdigit() and v not in ("", None)})
    out: dict[str, Any] = {}
    for (workload, policy), entry in sorted(per.items()):
        curves = entry["curves"]
        points = []
        for pct in range(0, 131):
            values = [c[pct] for c in curves if pct in c]
            if values:
                points.append([pct, round(sum(values) / len(values), 2)])
        out.setdefault(workload, {})[policy] = {"unallocated_at_100": entry["seeds"],
                                                "curve": points}
    return {"source": "hkust-adsl/kubernetes-scheduler-simulator "
                      "experiments/analysis/expected_results/analysis_allo_discrete.csv",
            "workloads": out}


def _parse(doc: Mapping[str, Any]) -> dict[str, dict[str, Published]]:
    result: dict[str, dict[str, Published]] = {}
    for workload, policies in doc["workloads"].items():
        for policy, entry in policies.items():
            result.setdefault(workload, {})[policy] = Published(
                workload=workload, policy=policy,
                unallocated_by_seed={int(s): float(v)
                                     for s, v in entry["unallocated_at_100"].items()},
                curve=tuple((int(p), float(v)) for p, v in entry["curve"]),
            )
    return result


def load() -> dict[str, dict[str, Published]]:
    """Published results by workload, then by policy."""
    text = resources.files("vgpu_simulate").joinpath("data/published.json").read_text(
        encoding="utf-8")
    return _parse(json.loads(text))


def dumps(doc: Mapping[str, Any]) -> str:
    """The shipped file's text: compact, keys sorted."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m vgpu_simulate.published analysis_allo_discrete.csv",
              file=sys.stderr)
        return 2
    sys.stdout.write(dumps(from_csv(Path(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
