#!/usr/bin/env bash
# Fetch Debian's `prometheus` package (prometheus and promtool) for the dashboard e2e
# test, unpacked into a cache folder beside the control plane's (no system install).
# Prints the folder holding the two binaries as its last line of stdout.
set -Eeuo pipefail

CACHE_ROOT="${VGPUDEV_CP_CACHE:-$HOME/.cache/vgpu-controlplane}"
DEST="$CACHE_ROOT/prometheus"
BIN="$DEST/usr/bin"
if [ -x "$BIN/prometheus" ] && [ -x "$BIN/promtool" ]; then
    echo "$BIN"
    exit 0
fi
# tests/controlplane/build.sh leaves a private apt configuration with fresh package
# lists there; without it, the system's configuration is used.
if [ -f "$CACHE_ROOT/apt/apt.conf" ]; then
    export APT_CONFIG="$CACHE_ROOT/apt/apt.conf"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get -q download prometheus >&2) || {
    echo "apt-get download prometheus failed (run apt-get update?)" >&2
    exit 1
}
mkdir -p "$DEST.tmp"
dpkg -x "$work"/prometheus_*.deb "$DEST.tmp"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
"$BIN/prometheus" --version >&2
echo "$BIN"
