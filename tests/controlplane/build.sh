#!/usr/bin/env bash
# Build the Kubernetes binaries the e2e tests run, from Debian bookworm packages
# alone (CI reaches only the package registries).
#
#   build.sh [TARGET...]      TARGET: controlplane, node, kube-scheduler,
#                             kube-controller-manager, all (default)
#
#   controlplane    kube-apiserver, kubectl (go build) and etcd (etcd-server's binary)
#   node            kubelet (go build); containerd, containerd-shim-runc-v2, ctr, runc
#                   and busybox (busybox-static, for the test images), unpacked from
#                   Debian's packages: nothing is installed system-wide
#   kube-scheduler  kube-scheduler (go build)
#   kube-controller-manager
#                   kube-controller-manager (go build); tests run only the
#                   controllers they need (ResourceQuota, ReplicaSet, Deployment)
#
# Everything lands in a cache folder outside the repository, keyed by the
# Debian version of the `kubernetes` source package:
#   ${VGPUDEV_CP_CACHE:-$HOME/.cache/vgpu-controlplane}/<version>/bin/
# Each target has its own stamp file there (.complete is the control plane's, as
# before the other targets existed), so a cache made by an older build.sh is
# extended with the missing targets, reusing its sources and Go build cache.
# A run whose targets are all stamped returns at once, without network.
#
# Prints the bin folder as its last line of stdout; progress goes to stderr.
set -Eeuo pipefail

# The version CI expects; if the archive has moved past it (Debian keeps only
# the newest), the newest available one is built instead, under its own key.
KUBE_DEB_VERSION="${VGPUDEV_CP_KUBE_DEB_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}"
GO_PKG="golang-1.19"

CACHE_ROOT="${VGPUDEV_CP_CACHE:-$HOME/.cache/vgpu-controlplane}"
APT_DIR="$CACHE_ROOT/apt"

set_version() {
    KUBE_DEB_VERSION="$1"
    # The upstream tag behind the Debian version ("1.20.5+really1.20.2-1" is
    # v1.20.2); stamped into the binaries because a GOPATH build has no git
    # metadata and would report v0.0.0.
    local up="${KUBE_DEB_VERSION%%-*}"
    case "$up" in *+really*) up="${up##*+really}" ;; esac
    up="${up%%+*}"
    KUBE_GIT_VERSION="${VGPUDEV_CP_KUBE_GIT_VERSION:-v$up}"
    VDIR="$CACHE_ROOT/$KUBE_DEB_VERSION"
    BIN="$VDIR/bin"
    WORK="$VDIR/build"
}
set_version "$KUBE_DEB_VERSION"

log() { printf '[controlplane-build %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() {
    printf '\n[controlplane-build] FAILED: %s\n' "$*" >&2
    exit 1
}
trap 'printf "[controlplane-build] FAILED at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

# Targets, their stamps and the executables each one leaves in $BIN.
TARGETS=()
for t in "${@:-all}"; do
    case "$t" in
        all) TARGETS+=(controlplane node kube-scheduler kube-controller-manager) ;;
        controlplane | node | kube-scheduler | kube-controller-manager) TARGETS+=("$t") ;;
        *) printf 'build.sh: unknown target %s (controlplane, node, kube-scheduler, kube-controller-manager, all)\n' "$t" >&2; exit 2 ;;
    esac
done
stamp_of() { if [ "$1" = controlplane ]; then echo "$BIN/.complete"; else echo "$BIN/.complete-$1"; fi; }
outputs_of() {
    case "$1" in
        controlplane) echo kube-apiserver kubectl etcd ;;
        node) echo kubelet containerd containerd-shim-runc-v2 ctr runc busybox ;;
        kube-scheduler) echo kube-scheduler ;;
        kube-controller-manager) echo kube-controller-manager ;;
    esac
}
target_built() {
    [ -f "$(stamp_of "$1")" ] || return 1
    local exe
    for exe in $(outputs_of "$1"); do [ -x "$BIN/$exe" ] || return 1; done
}
built() {
    local t
    for t in "${TARGETS[@]}"; do target_built "$t" || return 1; done
}
if built; then
    echo "$BIN"
    exit 0
fi

# --- private apt configuration ------------------------------------------------
# apt-get source needs deb-src lines; the system's configuration is not ours to
# edit, so derive a private sources list from its Debian entries.
setup_apt() {
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$APT_DIR/sources.list.d"
    python3 - "$APT_DIR/sources.list" <<'PY' || die "could not derive Debian deb-src entries from /etc/apt"
import glob, os, re, sys

mirror = os.environ.get("VGPUDEV_CP_DEBIAN_MIRROR")
out = []
def want(suite: str) -> bool:
    return re.fullmatch(r"bookworm(-updates|-security)?", suite) is not None

for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[0].isspace():
                continue
            k, v = line.split(":", 1)
            fields[k.strip().lower()] = v.strip()
        if fields.get("enabled", "yes").lower() == "no" or "deb" not in fields.get("types", "").split():
            continue
        suites = [s for s in fields.get("suites", "").split() if want(s)]
        if not suites:
            continue
        opts = f" [signed-by={fields['signed-by']}]" if "signed-by" in fields else ""
        for uri in fields.get("uris", "").split():
            for s in suites:
                for t in ("deb", "deb-src"):
                    out.append(f"{t}{opts} {uri} {s} {fields.get('components', 'main')}")

for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    if not os.path.exists(path):
        continue
    for line in open(path):
        m = re.match(r"\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)", line)
        if m and want(m.group(3)):
            opts = f" {m.group(1).strip()}" if m.group(1) else ""
            for t in ("deb", "deb-src"):
                out.append(f"{t}{opts} {m.group(2)} {m.group(3)} {m.group(4).strip()}")

if mirror:
    key = "/usr/share/keyrings/debian-archive-keyring.gpg"
    out = [f"{t} [signed-by={key}] {mirror} bookworm main" for t in ("deb", "deb-src")]
if not out:
    sys.exit("no bookworm entries in /etc/apt; set VGPUDEV_CP_DEBIAN_MIRROR to a Debian mirror URL")
open(sys.argv[1], "w").write("\n".join(dict.fromkeys(out)) + "\n")
PY
    cat >"$APT_DIR/apt.conf" <<EOF
Dir::Etc::SourceList "$APT_DIR/sources.list";
Dir::Etc::SourceParts "$APT_DIR/sources.list.d";
Dir::State::Lists "$APT_DIR/lists";
Dir::Cache "$APT_DIR/cache";
// The cache lives under \$HOME, which the _apt sandbox user cannot enter.
APT::Sandbox::User "root";
EOF
    export APT_CONFIG="$APT_DIR/apt.conf"
    log "apt-get update (private config $APT_CONFIG)"
    # --error-on=any: by default an unreachable mirror is only a warning, and
    # the failure would surface later as a confusing "no such package".
    apt-get -q update --error-on=any >"$APT_DIR/update.log" 2>&1 \
        || { cat "$APT_DIR/update.log" >&2; die "apt-get update failed (private config $APT_CONFIG)"; }
}

# Download a binary package and unpack it (no install, nothing system-wide).
unpack_deb() {
    local pkg="$1" dest="$2"
    mkdir -p "$WORK/debs" "$dest"
    (cd "$WORK/debs" && rm -f "${pkg}"_*.deb && apt-get -q download "$pkg" >&2) || die "apt-get download $pkg failed"
    local deb
    deb=$(ls "$WORK/debs/${pkg}"_*.deb)
    dpkg -x "$deb" "$dest" || die "dpkg -x $deb failed"
    log "unpacked $(basename "$deb")"
}

# Two concurrent callers (e.g. a developer's pytest and a CLI run) must not
# share the private apt lists or build over each other.
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.lock"
if ! flock -n 9; then
    log "another build holds $CACHE_ROOT/.lock; waiting for it"
    flock 9
fi
if built; then
    echo "$BIN"
    exit 0
fi
START=$SECONDS
setup_apt

available=$(apt-cache showsrc --only-source kubernetes 2>/dev/null | sed -n 's/^Version: //p' | sort -u) || true
[ -n "$available" ] || die "no kubernetes source package in the Debian archive (sources: $APT_DIR/sources.list)"
if ! grep -qxF "$KUBE_DEB_VERSION" <<<"$available"; then
    newest=""
    for v in $available; do
        if [ -z "$newest" ] || dpkg --compare-versions "$v" gt "$newest"; then newest="$v"; fi
    done
    log "WARNING: kubernetes $KUBE_DEB_VERSION is no longer in the archive; using $newest"
    set_version "$newest"
fi

if built; then
    echo "$BIN"
    exit 0
fi
mkdir -p "$WORK" "$BIN"
log "building kubernetes $KUBE_DEB_VERSION ($KUBE_GIT_VERSION) into $VDIR"

# --- sources ------------------------------------------------------------------
SRC="$WORK/src"
if [ ! -f "$WORK/.src-done" ]; then
    log "apt-get source kubernetes=$KUBE_DEB_VERSION"
    rm -rf "$WORK/source" "$SRC"
    mkdir -p "$WORK/source"
    (cd "$WORK/source" && apt-get -q source "kubernetes=$KUBE_DEB_VERSION" >"$WORK/apt-source.log" 2>&1) \
        || { tail -30 "$WORK/apt-source.log" >&2; die "apt-get source kubernetes=$KUBE_DEB_VERSION failed (is that version still in bookworm? set VGPUDEV_CP_KUBE_DEB_VERSION)"; }
    dir=$(find "$WORK/source" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -1)
    [ -n "$dir" ] || die "no kubernetes-* folder after apt-get source"
    mv "$dir" "$SRC"
    rm -rf "$WORK/source"
    touch "$WORK/.src-done"
fi

GOX="$WORK/go"
if [ ! -f "$WORK/.go-done" ]; then
    log "unpacking $GO_PKG toolchain"
    rm -rf "$GOX"
    unpack_deb "$GO_PKG-go" "$GOX"
    unpack_deb "$GO_PKG-src" "$GOX"
    touch "$WORK/.go-done"
fi
export GOROOT="$GOX/usr/lib/${GO_PKG/golang-/go-}"
[ -x "$GOROOT/bin/go" ] || die "no go binary at $GOROOT/bin/go"
# The -go package links GOROOT/src to an absolute /usr/share path that only
# exists when -src is installed system-wide; point it into our unpack.
if [ ! -d "$GOROOT/src/runtime" ]; then
    rm -f "$GOROOT/src"
    ln -s "$GOX/usr/share/${GO_PKG/golang-/go-}/src" "$GOROOT/src"
fi
[ -d "$GOROOT/src/runtime" ] || die "Go standard library sources missing under $GOROOT/src"

export GOPATH="$WORK/gopath"
export GOCACHE="$WORK/gocache"
export GO111MODULE=off
export CGO_ENABLED=0
export GOFLAGS=
export PATH="$GOROOT/bin:$PATH"
mkdir -p "$GOPATH/src/k8s.io"
ln -sfn "$SRC" "$GOPATH/src/k8s.io/kubernetes"
KPKG="$GOPATH/src/k8s.io/kubernetes"
log "$(go version)"

# --- fix 2: reflect2 1.0.1 faults under Go >= 1.18 ------------------------------
if [ ! -f "$WORK/.reflect2-done" ]; then
    log "replacing vendored modern-go/reflect2 and json-iterator/go with Debian's"
    DEV="$WORK/gocode-dev"
    rm -rf "$DEV"
    unpack_deb golang-github-modern-go-reflect2-dev "$DEV"
    unpack_deb golang-github-json-iterator-go-dev "$DEV"
    for p in github.com/modern-go/reflect2 github.com/json-iterator/go; do
        [ -d "$DEV/usr/share/gocode/src/$p" ] || die "Debian package has no $p sources"
        rm -rf "$SRC/vendor/$p"
        cp -rL "$DEV/usr/share/gocode/src/$p" "$SRC/vendor/$p"
    done
    touch "$WORK/.reflect2-done"
fi

# --- fix 1: generated OpenAPI definitions (not shipped in the tarball) ----------
OPENAPI_OUT="$SRC/pkg/generated/openapi/zz_generated.openapi.go"
if [ ! -f "$WORK/.openapi-done" ]; then
    log "building openapi-gen"
    go build -o "$WORK/openapi-gen" k8s.io/kubernetes/vendor/k8s.io/kube-openapi/cmd/openapi-gen \
        || die "building openapi-gen failed"
    # Same package selection as upstream's Makefile.generated_files (its KUBE
    # target): every folder with a '// +k8s:openapi-gen=' tag, less
    # code-generator and sample-apiserver; staging packages are named by their
    # vendor/ path, as the build sees them.
    pkgs=$(cd "$SRC" && grep -rl --include='*.go' -E '^// *\+k8s:openapi-gen=' pkg cmd plugin staging/src 2>/dev/null \
        | grep -v -E '(^|/)(_[^/]*|testdata)/|^staging/src/k8s.io/(code-generator|sample-apiserver)/' \
        | xargs -n1 dirname | LC_ALL=C sort -u \
        | sed -e 's|^staging/src/|k8s.io/kubernetes/vendor/|' -e 't' -e 's|^|k8s.io/kubernetes/|' \
        | paste -sd, -)
    [ -n "$pkgs" ] || die "found no +k8s:openapi-gen packages"
    log "running openapi-gen over $(tr ',' '\n' <<<"$pkgs" | wc -l) packages"
    rm -f "$OPENAPI_OUT"
    (cd "$KPKG" && "$WORK/openapi-gen" \
        --logtostderr -v 1 \
        -i "$pkgs" \
        -p k8s.io/kubernetes/pkg/generated/openapi \
        -O zz_generated.openapi \
        -h "$SRC/vendor/k8s.io/code-generator/hack/boilerplate.go.txt" \
        -r "$WORK/openapi-violations.report" \
        -o "$GOPATH/src") >"$WORK/openapi-gen.log" 2>&1 \
        || { tail -30 "$WORK/openapi-gen.log" >&2; die "openapi-gen failed (log: $WORK/openapi-gen.log)"; }
    [ -s "$OPENAPI_OUT" ] || die "openapi-gen wrote no $OPENAPI_OUT"
    touch "$WORK/.openapi-done"
fi

# --- fix 3: version stamp -------------------------------------------------------
major="${KUBE_GIT_VERSION#v}"; major="${major%%.*}"
minor="${KUBE_GIT_VERSION#v*.}"; minor="${minor%%.*}"
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    # GOPATH mode names vendored packages by their vendor/ path; -X on a
    # package that is not linked is ignored, so both spellings are given.
    for path in "k8s.io/kubernetes/vendor/$pkg" "$pkg"; do
        LDFLAGS+=" -X $path.gitVersion=$KUBE_GIT_VERSION -X $path.gitMajor=$major -X $path.gitMinor=$minor"
        LDFLAGS+=" -X $path.gitTreeState=clean -X $path.buildDate=1970-01-01T00:00:00Z"
    done
done

# One Go command into $BIN, unless an earlier run left it there (a binary only
# gets its name once its build finished).
go_build() {
    local cmd="$1"
    [ -x "$BIN/$cmd" ] && return 0
    log "go build cmd/$cmd (cold: several minutes on 2 cores)"
    (cd "$KPKG" && go build -tags 'selinux notest' -ldflags "$LDFLAGS" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd") \
        || die "go build cmd/$cmd failed"
    mv -f "$BIN/$cmd.tmp" "$BIN/$cmd"
}

write_stamp() {
    local target="$1" began="$2"
    {
        echo "target=$target"
        echo "kubernetes_deb=$KUBE_DEB_VERSION"
        echo "git_version=$KUBE_GIT_VERSION"
        echo "go=$(go version)"
        shift 2
        for line in "$@"; do echo "$line"; done
        echo "built=$(date -u +%FT%TZ) seconds=$((SECONDS - began))"
    } >"$(stamp_of "$target")"
    log "$target done in $((SECONDS - began)) s"
}

build_controlplane() {
    local began=$SECONDS
    go_build kube-apiserver
    go_build kubectl
    log "unpacking etcd-server"
    rm -rf "$WORK/etcd"
    unpack_deb etcd-server "$WORK/etcd"
    [ -x "$WORK/etcd/usr/bin/etcd" ] || die "etcd-server has no usr/bin/etcd"
    cp -f "$WORK/etcd/usr/bin/etcd" "$BIN/etcd"
    "$BIN/kube-apiserver" --version >&2 || die "built kube-apiserver does not run"
    "$BIN/kubectl" version --client --short >&2 || die "built kubectl does not run"
    "$BIN/etcd" --version >&2 || die "unpacked etcd does not run"
    write_stamp controlplane "$began"
}

# The binary of a Debian package, copied out of its unpack into $BIN.
deb_binary() {
    local pkg="$1" path="$2" name="${3:-$(basename "$2")}"
    [ -x "$WORK/debs-unpacked/$pkg/$path" ] || die "$pkg has no $path"
    cp -f "$WORK/debs-unpacked/$pkg/$path" "$BIN/$name"
}

build_node() {
    local began=$SECONDS pkg versions=()
    go_build kubelet
    # A real node's runtime, pinned by the archive as the kubelet is; run from
    # here with their own root and socket (tests/controlplane/node_runtime.py).
    for pkg in containerd runc busybox-static; do
        rm -rf "$WORK/debs-unpacked/$pkg"
        unpack_deb "$pkg" "$WORK/debs-unpacked/$pkg"
        versions+=("$pkg=$(dpkg-deb -f "$WORK/debs/${pkg}"_*.deb Version)")
    done
    deb_binary containerd usr/bin/containerd
    deb_binary containerd usr/bin/containerd-shim-runc-v2
    deb_binary containerd usr/bin/ctr
    deb_binary runc usr/sbin/runc
    deb_binary busybox-static bin/busybox
    "$BIN/kubelet" --version >&2 || die "built kubelet does not run"
    "$BIN/containerd" --version >&2 || die "unpacked containerd does not run"
    "$BIN/runc" --version >&2 || die "unpacked runc does not run"
    write_stamp node "$began" "${versions[@]}"
}

build_kube_scheduler() {
    local began=$SECONDS
    go_build kube-scheduler
    "$BIN/kube-scheduler" --version >&2 || die "built kube-scheduler does not run"
    write_stamp kube-scheduler "$began"
}

build_kube_controller_manager() {
    local began=$SECONDS
    go_build kube-controller-manager
    "$BIN/kube-controller-manager" --version >&2 || die "built kube-controller-manager does not run"
    write_stamp kube-controller-manager "$began"
}

for t in "${TARGETS[@]}"; do
    target_built "$t" && continue
    case "$t" in
        controlplane) build_controlplane ;;
        node) build_node ;;
        kube-scheduler) build_kube_scheduler ;;
        kube-controller-manager) build_kube_controller_manager ;;
    esac
done
log "done in $((SECONDS - START)) s: $BIN"
echo "$BIN"
