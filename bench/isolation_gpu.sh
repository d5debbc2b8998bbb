#!/bin/sh
# The isolation measurement on a machine with an NVIDIA GPU, in one go (docs/isolation.md).
#
#   bench/isolation_gpu.sh HAMI_CORE_SOURCE [OUT_DIR]
#
# 1. Builds HAMi-core from HAMI_CORE_SOURCE exactly as its build.sh does (Debug: any other
#    build type adds -fvisibility=hidden and its wrappers are not exported, so it enforces
#    nothing), checks that libvgpu.so exports the wrappers, and puts it where HAMi mounts it
#    (/usr/local/vgpu/libvgpu.so; needs root).
# 2. Records what the library does when CUDA starts (LIBCUDA_LOG_LEVEL=4), for the case it
#    does not enforce.
# 3. Runs bench/isolation.py three times: HAMi-core, then MPS through the agent's own
#    daemon, two clients at once, a faulting client, the agent replaced, the watchdog on
#    real NVML; then the agent's own install of that build from a bundle laid out as the
#    image's /opt/vgpu/hami-core (indexed by the image build's step), MPS with HAMi-core
#    beside it (mps-hami-core), and two uids on the MPS GPU placed by vgpu's scheduler.
#
# Writes build.log, symbols.txt, hami-debug.log, hami.json, mps.json, installed.json (each
# bench run's last line) and their stderr logs into OUT_DIR (default ./isolation-out).
# Needs nvcc, cmake, make, torch or cupy, and nvidia-cuda-mps-control on PATH.
set -u
SRC=$(cd "${1:?HAMi-core source folder}" && pwd)
OUT=${2:-./isolation-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
NVCC=$(command -v nvcc) || { echo "nvcc not on PATH" >&2; exit 2; }
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
# Link against the toolkit's driver stubs; at run time the driver's own libraries load.
export LIBRARY_PATH="$CUDA_HOME/lib64/stubs:$CUDA_HOME/targets/x86_64-linux/lib/stubs:${LIBRARY_PATH:-}"

echo "== build (build.sh, Debug) with $CUDA_HOME" | tee "$OUT/build.log"
# CMake 4 refuses cmake_minimum_required below 3.5 unless told the policy floor.
(cd "$SRC" && J=$(nproc) CMAKE_OPTIONS="-DCMAKE_POLICY_VERSION_MINIMUM=3.5" sh ./build.sh) \
    >>"$OUT/build.log" 2>&1 \
  || (echo "== build.sh failed; the library target alone" && cd "$SRC/build" \
      && make -j"$(nproc)" vgpu) >>"$OUT/build.log" 2>&1
LIB="$SRC/build/libvgpu.so"
[ -f "$LIB" ] || { echo "no $LIB (see $OUT/build.log)" >&2; tail -30 "$OUT/build.log" >&2; exit 1; }
grep -o -- '-fvisibility=hidden' "$SRC/build/src/CMakeFiles/vgpu.dir/flags.make" \
    >/dev/null 2>&1 && echo "WARNING: built with -fvisibility=hidden" | tee -a "$OUT/build.log"
nm -D --defined-only "$LIB" | awk '{print $3}' | sort >"$OUT/symbols.txt"
for s in cuMemAlloc_v2 cuMemGetInfo_v2 cuGetProcAddress_v2 cuGetProcAddress; do
    if grep -qx "$s" "$OUT/symbols.txt"; then echo "exported: $s"; else echo "MISSING: $s"; fi
done | tee -a "$OUT/build.log"
echo "exported symbols: $(wc -l <"$OUT/symbols.txt")" | tee -a "$OUT/build.log"
mkdir -p /usr/local/vgpu /tmp/vgpulock && cp "$LIB" /usr/local/vgpu/libvgpu.so

echo "== HAMi-core's own log at CUDA start"
mkdir -p /tmp/vgpu-debug-cache
(cd "$HERE" && LD_PRELOAD=/usr/local/vgpu/libvgpu.so LIBCUDA_LOG_LEVEL=4 \
  CUDA_DEVICE_MEMORY_LIMIT_0=2048m CUDA_DEVICE_SM_LIMIT=30 \
  CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/vgpu-debug-cache/debug.cache \
  timeout 120 python3 bench/_isolation_child.py measure 2048 1) \
  >"$OUT/hami-debug.out" 2>"$OUT/hami-debug.full" || true
head -c 3000000 "$OUT/hami-debug.full" >"$OUT/hami-debug.log"; rm -f "$OUT/hami-debug.full"
echo "log lines: $(wc -l <"$OUT/hami-debug.log"); cuGetProcAddress lines:" \
     "$(grep -c cuGetProcAddress "$OUT/hami-debug.log"); result: $(tail -1 "$OUT/hami-debug.out")"

echo "== bench/isolation.py: HAMi-core"
(cd "$HERE" && timeout 240 python3 bench/isolation.py --checks hami-core \
   --hami-lib /usr/local/vgpu/libvgpu.so) >"$OUT/hami.out" 2>"$OUT/hami.err"
tail -1 "$OUT/hami.out" | tee "$OUT/hami.json"

echo "== bench/isolation.py: MPS through the agent, the watchdog"
(cd "$HERE" && timeout 300 python3 bench/isolation.py \
   --checks mps,pair,restart,watchdog,fault) >"$OUT/mps.out" 2>"$OUT/mps.err"
tail -1 "$OUT/mps.out" | tee "$OUT/mps.json"

echo "== bench/isolation.py: the agent's install, mps-hami-core, two uids on MPS"
MAJOR=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
REF=$(cd "$SRC" && git rev-parse HEAD 2>/dev/null || echo unknown)
rm -rf "$OUT/bundle" && mkdir -p "$OUT/bundle/cuda$MAJOR" && cp "$LIB" "$OUT/bundle/cuda$MAJOR/"
(cd "$HERE" && python3 -m vgpu_nodeagent.isolation.hami_bundle "$OUT/bundle" --ref "$REF") \
    >>"$OUT/build.log" 2>&1 || echo "the bundle index was refused (see $OUT/build.log)"
(cd "$HERE" && timeout 300 python3 bench/isolation.py --hami-bundle "$OUT/bundle" \
   --checks installed,mps-hami-core,users) >"$OUT/installed.out" 2>"$OUT/installed.err"
tail -1 "$OUT/installed.out" | tee "$OUT/installed.json"
