#!/usr/bin/env bash
# Build the Dockerfile's image without a Docker daemon, check that its entry point runs,
# and record its size. Called by .ci/run; runs alone too: `bash tests/image/build.sh`.
#
# - Builder: buildah from Debian bookworm, vfs storage (no overlay mounts, no fuse) and
#   chroot isolation (no user namespaces, no runc), so it needs root but no daemon.
# - Bases: CI reaches no image registry, so `python:3.11-slim` cannot be pulled; the
#   bases are assembled from Debian's packages with mmdebstrap in one tree: the
#   `essential` set with python3, its venv module, libstdc++ (the manylinux wheels of
#   numpy and grpc load it from the system) and binutils, merged /usr, no docs or
#   locales. That tree is the build stage's BUILD_BASE; the same tree with every package
#   but what python3, sh and sed need purged (tests/image/trim_base.py) is the image's
#   BASE. With a registry at hand, `docker build .` uses python:3.11-slim for both.
# - Cache, outside the repository: ${VGPUDEV_IMAGE_CACHE:-$HOME/.cache/vgpu-image} holds the
#   bases' tarballs (keyed by their recipe and trim_base.py), buildah's storage (the base
#   images and the build's layers) and its pip cache mount, so a rebuild downloads
#   nothing and redoes only the layers after the first changed COPY.
# - Checks, each run as the image's USER inside its filesystem (buildah run, chroot
#   isolation): the image's own ENTRYPOINT with `--help`, `nodeagent --help` and
#   `inspect --help`; tests/image/imports.py (every component module imports, the
#   compiled libraries work, no kubernetes client); `certs --out-dir` (cryptography).
# - Archive for a real node: the image as a docker-archive tar
#   which `ctr images import` reads (the install suite, tests/e2e/test_install*.py, imports it
#   into its node's containerd): $VGPUDEV_IMAGE_CACHE/archives/<inputs>.tar, named by the
#   digest of the build's inputs (tests/image/context.py), with a .json naming the image id.
# - Record: uncompressed size (the sum of its layers, what `docker images` shows) and
#   compressed size (gzip, what a registry stores), in $VGPUDEV_IMAGE_CACHE/report.json
#   and on stdout. The build fails above VGPUDEV_IMAGE_MAX_MB (default 200, the target), so
#   growth shows.
set -Eeuo pipefail
cd "$(dirname "$0")/../.."

CACHE="${VGPUDEV_IMAGE_CACHE:-$HOME/.cache/vgpu-image}"
TARGET_MB=200
MAX_MB="${VGPUDEV_IMAGE_MAX_MB:-$TARGET_MB}"
TAG="localhost/vgpu:ci"
mkdir -p "$CACHE"
# Taken before the build reads them: the archive's record names what it was built from.
INPUTS="$(python3 tests/image/context.py .)"

log() { printf '[image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
trap 'printf "[image] FAILED at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

# --- tools ----------------------------------------------------------------------------
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]} from Debian"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
log "$(buildah --version)"

# --- the bases, from Debian's packages --------------------------------------------------
SOURCES=/etc/apt/sources.list.d/debian.sources
[ -f "$SOURCES" ] || SOURCES="http://deb.debian.org/debian"
MM=(mmdebstrap --variant=essential --include=python3,python3-venv,libstdc++6,binutils
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --mode=root --format=directory bookworm)
key="$( { printf '%s\n' "${MM[@]}"; cat tests/image/trim_base.py; } | sha256sum | cut -c1-12)"
BUILD_TAR="$CACHE/build-base-$key.tar"
BASE_TAR="$CACHE/base-$key.tar"
BUILD_BASE="localhost/vgpu-build-base:$key"
BASE="localhost/vgpu-base:$key"
if [ ! -f "$BASE_TAR" ] || [ ! -f "$BUILD_TAR" ]; then
    log "assembling the bases from Debian bookworm (mmdebstrap and trim_base.py, about 40 s)"
    tree="$CACHE/tree.tmp"
    rm -rf "$tree"
    tarball() { tar --numeric-owner --xattrs --xattrs-include='*' -C "$tree" -cf "$1" .; }
    { "${MM[@]}" "$tree" "$SOURCES" && tarball "$BUILD_TAR.tmp" \
        && python3 tests/image/trim_base.py "$tree" && tarball "$BASE_TAR.tmp"; } \
        >"$CACHE/mmdebstrap.log" 2>&1 || { tail -20 "$CACHE/mmdebstrap.log" >&2; exit 1; }
    rm -rf "$tree"
    mv "$BUILD_TAR.tmp" "$BUILD_TAR"
    mv "$BASE_TAR.tmp" "$BASE_TAR"
fi

# Every changed build leaves its layers behind; start the store afresh past 4 GB.
if [ -d "$CACHE/storage" ] && [ "$(du -sm "$CACHE/storage" | cut -f1)" -gt 4096 ]; then
    log "buildah storage over 4 GB: starting it afresh"
    buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs \
        rm --all >/dev/null 2>&1 || true
    rm -rf "$CACHE/storage" "$CACHE/run"
fi
B=(buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs)
export BUILDAH_ISOLATION=chroot
import_base() {  # TARBALL IMAGE
    "${B[@]}" inspect --type image "$2" >/dev/null 2>&1 && return
    log "importing $(basename "$1") as $2"
    local ctr
    ctr="$("${B[@]}" from scratch)"
    "${B[@]}" add "$ctr" "$1" / >/dev/null
    "${B[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd /bin/sh "$ctr"
    "${B[@]}" commit --quiet --rm "$ctr" "$2" >/dev/null
}
import_base "$BUILD_TAR" "$BUILD_BASE"
import_base "$BASE_TAR" "$BASE"

# --- the build ----------------------------------------------------------------------------
log "building $TAG from the Dockerfile"
# pip in the build trusts what pip here trusts: a proxy's CA bundle, when one is set.
trust=()
ca="${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}"
if [ -n "$ca" ] && [ -f "$ca" ]; then
    trust=(--volume "$ca:/run/vgpu-build/ca.pem:ro" --build-arg PIP_CERT=/run/vgpu-build/ca.pem)
fi
start=$SECONDS
# --target vgpu: the image without HAMi-core, whose stages need the network (the Dockerfile).
"${B[@]}" bud --quiet --layers --isolation chroot --target vgpu --build-arg "BASE=$BASE" \
    --build-arg "BUILD_BASE=$BUILD_BASE" "${trust[@]}" --iidfile "$CACHE/iid.$$" \
    -t "$TAG" -f Dockerfile . >"$CACHE/build.log" 2>&1 || { tail -30 "$CACHE/build.log" >&2; exit 1; }
# This build's image, whatever another checkout sharing the cache tags meanwhile.
image_id="$(cat "$CACHE/iid.$$")"
image_id="${image_id#sha256:}"
rm -f "$CACHE/iid.$$"
build_s=$((SECONDS - start))

# --- checks inside the image ---------------------------------------------------------------
inspect="$("${B[@]}" inspect --type image "$TAG")"
oci() { python3 -c "import json,sys; c=json.load(sys.stdin)['OCIv1']; $1" <<<"$inspect"; }
mapfile -t entrypoint < <(oci 'print(*c["config"]["Entrypoint"], sep="\n")')
user="$(oci 'print(c["config"].get("User", ""))')"
ctr="$("${B[@]}" from --quiet "$TAG")"
cleanup() { "${B[@]}" rm "$ctr" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# Measured before the checks below write anything into the container.
size="$(du -sb "$("${B[@]}" mount "$ctr")" | cut -f1)"
in_image() { "${B[@]}" run --isolation chroot --user "$user" "$ctr" -- "$@" 2>&1; }
for args in "--help" "nodeagent --help" "inspect --help"; do
    # shellcheck disable=SC2086  # the argument lists split on purpose
    out="$(in_image "${entrypoint[@]}" $args)" \
        || { printf '%s\n' "$out" >&2; log "FAILED: ${entrypoint[*]} $args in the image"; exit 1; }
    grep -q "usage: vgpu" <<<"$out" || { printf '%s\n' "$out" >&2; exit 1; }
    log "ok: ${entrypoint[*]} $args (as user $user)"
done
# What the components import at run time, and the compiled libraries after strip.
out="$(in_image python3 -c "$(cat tests/image/imports.py)")" \
    || { printf '%s\n' "$out" >&2; log "FAILED: tests/image/imports.py in the image"; exit 1; }
log "ok: ${out##*$'\n'}"
out="$(in_image "${entrypoint[@]}" certs --out-dir /tmp/vgpu-certs)" \
    || { printf '%s\n' "$out" >&2; log "FAILED: ${entrypoint[*]} certs --out-dir in the image"; exit 1; }
log "ok: ${entrypoint[*]} certs --out-dir /tmp/vgpu-certs (as user $user)"

# --- size --------------------------------------------------------------------------------
layers="$(oci 'print(len(c["rootfs"]["diff_ids"]))')"
rm -rf "$CACHE/oci"
"${B[@]}" push --quiet "$TAG" "oci:$CACHE/oci:ci" >/dev/null 2>&1
compressed="$(python3 - "$CACHE/oci" <<'PY'
import json, os, sys
root = sys.argv[1]
index = json.load(open(os.path.join(root, "index.json")))
def blob(digest):
    return os.path.join(root, "blobs", *digest.split(":"))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
print(sum(layer["size"] for layer in manifest["layers"]))
PY
)"
rm -rf "$CACHE/oci"
python3 - "$CACHE/report.json" "$size" "$compressed" "$build_s" "$MAX_MB" "$layers" \
    "$TARGET_MB" <<'PY'
import json, sys
path, size, compressed, seconds, max_mb, layers, target_mb = sys.argv[1:]
report = {"image": "localhost/vgpu:ci", "builder": "buildah (vfs, chroot isolation)",
          "base": "Debian bookworm via mmdebstrap", "size_bytes": int(size),
          "compressed_bytes": int(compressed), "layers": int(layers),
          "build_seconds": int(seconds), "target_mb": int(target_mb), "max_mb": int(max_mb)}
json.dump(report, open(path, "w"), indent=2)
met = "met" if int(size) <= int(target_mb) * 1e6 else "NOT met"
print(f"image {report['image']}: {int(size) / 1e6:.1f} MB uncompressed (target <= {target_mb} MB "
      f"{met}; fails above {max_mb} MB), "
      f"{int(compressed) / 1e6:.1f} MB compressed, {report['layers']} layers, "
      f"built in {seconds} s")
sys.exit(0 if int(size) <= int(max_mb) * 1e6 else 1)
PY

# --- the archive a real node imports ---------------------------------------------------------
# One per set of inputs, so that checkouts sharing this cache (and the tag) each find their
# own; the newest four are kept.
mkdir -p "$CACHE/archives"
archive="$CACHE/archives/$INPUTS.tar"
if [ -f "$archive" ] && grep -qF "\"$image_id\"" "$CACHE/archives/$INPUTS.json" 2>/dev/null; then
    log "archive $archive holds this image already"
else
    rm -f "$archive"
    "${B[@]}" push --quiet "$image_id" "docker-archive:$archive.$$:$TAG" >/dev/null
    mv -f "$archive.$$" "$archive"
    python3 - "$CACHE/archives/$INPUTS.json" "$TAG" "$image_id" "$INPUTS" <<'PY'
import json, sys
path, tag, image_id, inputs = sys.argv[1:]
json.dump({"image": tag, "id": image_id, "inputs": inputs}, open(path, "w"), indent=2)
PY
    log "wrote $archive"
fi
# shellcheck disable=SC2012  # names are hex digests
ls -t "$CACHE/archives"/*.tar | tail -n +5 | while read -r old; do rm -f "$old" "${old%.tar}.json"; done
