#!/usr/bin/env bash
# Every bundled variant x seeds 42..51 (or $SEEDS) for the given policies, one JSON file per variant
# and policy under OUT (default /tmp/vgpu-sim). Long: run it in the background, e.g.
#   nohup bash bench/simulate_variants.sh fgd fragmentation-aware > /tmp/vgpu-sim.log 2>&1 &
# then: python bench/simulate_summary.py /tmp/vgpu-sim
# Generated variants (bench/simulate_generate.py): PODS_DIR=/tmp/vgpu-variants replays every
# openb_pod_list_NAME.csv there (or the NAMEs in $VARIANTS) instead of the bundled lists.
set -euo pipefail
OUT=${OUT:-/tmp/vgpu-sim}
SEEDS=${SEEDS:-"$(seq 42 51)"}
PODS_DIR=${PODS_DIR:-}
if [ -n "$PODS_DIR" ]; then
  found=$(cd "$PODS_DIR" && ls openb_pod_list_*.csv | sed 's/^openb_pod_list_//; s/\.csv$//')
  VARIANTS=${VARIANTS:-$found}
fi
VARIANTS=${VARIANTS:-"default gpushare40 gpushare60 gpushare80 gpushare100 cpu050 cpu100 cpu200 cpu250"}
POLICIES=("$@")
[ ${#POLICIES[@]} -gt 0 ] || POLICIES=(fragmentation-aware fgd bestfit)
mkdir -p "$OUT"
for variant in $VARIANTS; do
  if [ -n "$PODS_DIR" ]; then
    source=(--pods "$PODS_DIR/openb_pod_list_$variant.csv")
  else
    source=(--variant "$variant")
  fi
  for policy in "${POLICIES[@]}"; do
    target="$OUT/$variant.$policy.json"
    [ -s "$target" ] && continue
    seeds=()
    for s in $SEEDS; do seeds+=(--seed "$s"); done
    python -m vgpu.cli simulate "${source[@]}" --policy "$policy" "${seeds[@]}" \
      --json "$target.tmp" --no-plot > /dev/null
    mv "$target.tmp" "$target"
    echo "$(date +%T) $variant $policy done"
  done
done
