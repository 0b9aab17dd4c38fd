#!/usr/bin/env bash
# Everything a release of gpuquota publishes, into OUT-DIR (make release,
# docs/install.md#releases):
#   gpuquota-v<V>-linux-amd64.tar.gz        the binary (scripts/release-archive.sh)
#   gpuquota-v<V>-linux-arm64.tar.gz        the same, cross-built, when Debian's
#                                           arm64 toolchain and libraries are here
#   gpuquota-image-v<V>-linux-amd64.tar     the container image, an OCI archive
#                                           (scripts/build-image.sh)
#   gpuquota-<V>.tgz                        the Helm chart (helm package)
#   gpuquota.yaml                           the krew manifest, every platform's
#                                           sha256 and the version filled in
#   SHA256SUMS                              sha256sum of all of the above
# The version is the project's (CMakeLists.txt). The same tree gives the same
# bytes: the binaries are built optimised with this tree's path mapped away,
# the archives are sorted with owner 0 and fixed times (SOURCE_DATE_EPOCH: the
# last commit's time).
#
# Usage: scripts/release.sh OUT-DIR
# Environment:
#   ARM64=1   install Debian's arm64 cross compiler and -dev libraries when
#             they are missing (dpkg --add-architecture arm64, apt-get; root)
#             and build linux/arm64; fail if that cannot be done
#   ARM64=0   leave linux/arm64 out
#   (unset)   build linux/arm64 when the toolchain is installed, else leave it
#             out and say so
#   GQ_RELEASE_IMAGE=0   leave the image out (the fast test, test/release.cmake)
#   GQ_RELEASE_WORK      the build trees (default: build-release-work/)
#   HELM                 the helm binary (default: the one scripts/k8s-bin.sh builds)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[[ $# == 1 && -n $1 ]] || { echo "usage: scripts/release.sh OUT-DIR (make release)" >&2; exit 2; }
out=$1
arm64=${ARM64:-}
work=${GQ_RELEASE_WORK:-$ROOT/build-release-work}
v=$(sed -n 's/^project(gpuquota VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[[ -n $v ]] || { echo "release: no version in CMakeLists.txt" >&2; exit 1; }
version=v$v
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH=$epoch
log() { echo "release: $*" >&2; }
cflags="-ffile-prefix-map=$ROOT=."
arm_pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
arm_libs=(libjson-c-dev libyaml-dev libcurl4-openssl-dev libmicrohttpd-dev libgnutls28-dev libssl-dev
    libcmocka-dev)
# Not needed to build: qemu-user runs the arm64 binary here, so the release
# checks it starts (through the arm64 loader: qemu 7.2 does not start this
# PIE binary directly).
arm_run=(qemu-user)

# build NAME [CMAKE-ARGS...]: gpuquota, optimised, in $work/NAME.
build() {
    local dir=$work/$1
    shift
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DGQ_E2E=OFF -DGQ_BENCH=OFF \
        -DCMAKE_C_FLAGS="$cflags" "$@" >"$work/$(basename "$dir").log" 2>&1 &&
        cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target gpuquota -- --no-print-directory \
            >>"$work/$(basename "$dir").log" 2>&1 ||
        { log "the build in $dir failed:"; tail -20 "$work/$(basename "$dir").log" >&2; return 1; }
}

# arm64_missing: the arm64 packages that are not installed, one a line.
arm64_missing() {
    local p
    for p in "${arm_pkgs[@]}" "${arm_libs[@]/%/:arm64}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
    done
}

# arm64_install: Debian's cross compiler and the arm64 -dev libraries.
arm64_install() {
    [[ $(id -u) == 0 ]] || { log "ARM64=1 installs packages with apt-get and needs root"; return 1; }
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    log "installing $(arm64_missing | xargs)"
    apt-get update -qq >&2 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(arm64_missing) \
            "${arm_run[@]}" >&2
}

# arm64_runs: the arm64 binary, run under qemu-aarch64 when it is here, is
# gpuquota at this version.
arm64_runs() {
    local got
    if ! command -v qemu-aarch64 >/dev/null || [[ ! -e /lib/ld-linux-aarch64.so.1 ]]; then
        log "the arm64 binary is not run here (no qemu-aarch64; ARM64=1 installs qemu-user)"
        return 0
    fi
    got=$(qemu-aarch64 /lib/ld-linux-aarch64.so.1 "$work/linux-arm64/gpuquota" version 2>&1) || true
    [[ $got == "gpuquota $v" ]] || { log "the arm64 binary under qemu-aarch64 says [$got], not [gpuquota $v]"; exit 1; }
    log "the arm64 binary runs under qemu-aarch64: $got"
}

# arm64_wanted: 0 when linux/arm64 is built, the toolchain installed first
# with ARM64=1; 1 when it is left out. Decided before anything is built.
arm64_wanted() {
    local missing
    [[ $arm64 != 0 ]] || { log "linux/arm64 left out (ARM64=0)"; return 1; }
    missing=$(arm64_missing | xargs)
    if [[ -n $missing && $arm64 == 1 ]]; then
        arm64_install || { log "could not install the arm64 toolchain"; exit 1; }
        missing=$(arm64_missing | xargs)
        [[ -z $missing ]] || { log "still missing after apt-get: $missing"; exit 1; }
    fi
    if [[ -n $missing ]]; then
        log "linux/arm64 left out: missing $missing (make release ARM64=1 installs them)"
        return 1
    fi
}

# build_arm64: gpuquota for linux/arm64 with aarch64-linux-gnu-gcc against the
# arm64 libraries of Debian's multiarch paths.
build_arm64() {
    cat >"$work/aarch64-linux-gnu.cmake" <<'EOF'
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
EOF
    PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
        build linux-arm64 -DCMAKE_TOOLCHAIN_FILE="$work/aarch64-linux-gnu.cmake" || exit 1
    arm64_runs
}

# manifest_template: deploy/krew/gpuquota.yaml at this version, its header
# comment replaced, the arm64 platform dropped unless $1 is 1.
manifest_template() {
    local old
    old=$(sed -n 's/^  version: //p' "$ROOT/deploy/krew/gpuquota.yaml")
    awk -v old="$old" -v new="$version" -v arm="$1" '
        NR == 1 { print "# krew plugin manifest of kubectl gpuquota " new " (made by make release)" }
        /^#/ && !body { next }
        { body = 1 }
        /^  version: / || /^      uri: / { gsub(old, new) }
        /^    - selector:/ { block = "" ; inplat = 1 }
        inplat { block = block $0 "\n"; if ($0 ~ /^      bin:/) { if (arm == 1 || block !~ /arch: arm64/) printf "%s", block; inplat = 0 }; next }
        { print }' "$ROOT/deploy/krew/gpuquota.yaml"
}

# chart: helm package at the release version, then made reproducible: helm
# stamps each file with the time of packaging, so the tarball is written again
# with the same members in the same order at SOURCE_DATE_EPOCH.
chart() {
    local helm=${HELM:-}
    if [[ -z $helm ]]; then
        helm=$("$ROOT/scripts/k8s-bin.sh" --cached 2>/dev/null || "$ROOT/scripts/k8s-bin.sh" --quiet)/helm
    fi
    "$helm" package "$ROOT/deploy/helm/gpuquota" --version "$v" --app-version "$v" -d "$work/chart" >/dev/null
    python3 - "$work/chart/gpuquota-$v.tgz" "$out/gpuquota-$v.tgz" "$epoch" <<'PY'
import gzip, io, sys, tarfile
src, dst, epoch = sys.argv[1], sys.argv[2], int(sys.argv[3])
buf = io.BytesIO()
with tarfile.open(src) as t, tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as o:
    for m in t.getmembers():
        m.mtime = epoch
        m.uname = m.gname = ""
        o.addfile(m, t.extractfile(m) if m.isfile() else None)
with open(dst, "wb") as f, gzip.GzipFile(filename="", fileobj=f, mode="wb", mtime=0, compresslevel=9) as g:
    g.write(buf.getvalue())
PY
}

mkdir -p "$out" "$work"
rm -rf "$work/chart"
rm -f "$out"/gpuquota-v*-linux-*.tar.gz "$out"/gpuquota-image-v*.tar "$out"/gpuquota-*.tgz \
    "$out/gpuquota.yaml" "$out/SHA256SUMS"
log "gpuquota $version into $out"
[[ -z $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]] ||
    log "warning: the tree has uncommitted changes; the release is not the last commit's"
have_arm64=0
arm64_wanted && have_arm64=1
build linux-amd64
((have_arm64 == 0)) || build_arm64
manifest_template "$have_arm64" >"$work/gpuquota.yaml.in"
"$ROOT/scripts/release-archive.sh" --arch amd64 --version "$version" "$work/linux-amd64/gpuquota" "$out" \
    "$work/gpuquota.yaml.in" >"$work/gpuquota.yaml.amd64"
cp "$work/gpuquota.yaml.amd64" "$out/gpuquota.yaml"
made=("gpuquota-$version-linux-amd64.tar.gz")
if ((have_arm64)); then
    made+=("gpuquota-$version-linux-arm64.tar.gz")
    "$ROOT/scripts/release-archive.sh" --arch arm64 --version "$version" "$work/linux-arm64/gpuquota" "$out" \
        "$work/gpuquota.yaml.amd64" >"$out/gpuquota.yaml"
fi
if [[ ${GQ_RELEASE_IMAGE:-1} != 0 ]]; then
    GQ_IMAGE_BUILD=$work/linux-amd64 "$ROOT/scripts/build-image.sh" "$out/gpuquota-image-$version-linux-amd64.tar" >&2
    made+=("gpuquota-image-$version-linux-amd64.tar")
else
    log "the image left out (GQ_RELEASE_IMAGE=0)"
fi
chart
made+=("gpuquota-$v.tgz" gpuquota.yaml)
(cd "$out" && sha256sum "${made[@]}" >SHA256SUMS)
log "done:"
(cd "$out" && ls -l --time-style=+ "${made[@]}" SHA256SUMS) >&2
