#!/usr/bin/env bash
# Every bundled variant x seeds 42..51 (or $SEEDS) for the given policies, one JSON file per variant
# and policy under OUT (default /tmp/vgpu-sim). Long: run it in the background, e.g.
#   nohup bash bench/simulate_variants.sh fgd fragmentation-aware > /tmp/vgpu-sim.log 2>&1 &
# then: python bench/simulate_summary.py /tmp/vgpu-sim
set -euo pipefail
OUT=${OUT:-/tmp/vgpu-sim}
SEEDS=${SEEDS:-"$(seq 42 51)"}
VARIANTS=${VARIANTS:-"default gpushare40 gpushare60 gpushare80 gpushare100 cpu050 cpu100 cpu200 cpu250"}
POLICIES=("$@")
[ ${#POLICIES[@]} -gt 0 ] || POLICIES=(fragmentation-aware fgd bestfit)
mkdir -p "$OUT"
for variant in $VARIANTS; do
  for policy in "${POLICIES[@]}"; do
    target="$OUT/$variant.$policy.json"
    [ -s "$target" ] && continue
    seeds=()
    for s in $SEEDS; do seeds+=(--seed "$s"); done
    python -m vgpu.cli simulate --variant "$variant" --policy "$policy" "${seeds[@]}" \
      --json "$target.tmp" --no-plot > /dev/null
    mv "$target.tmp" "$target"
    echo "$(date +%T) $variant $policy done"
  done
done
