#!/usr/bin/env bash
# deploy/Dockerfile, the recipe for people who build with Docker, built as
# it is (test/image.cmake): buildah bud against local debian:bookworm and
# debian:bookworm-slim base images made by mmdebstrap from Debian's
# packages, so no registry is reached; then the image it makes runs
# `gpuquota version` as its own user. The base images and buildah's layers
# are kept in the cache folder, so a later run builds only what changed.
#
#   test/dockerfile_build.sh WORKDIR      (needs root)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
work=${1:?usage: dockerfile_build.sh WORKDIR}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gpuquota/dockerfile
rm -rf "$work"
mkdir -p "$work" "$cache"
failures=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
check() { if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }
for t in buildah mmdebstrap; do
    command -v "$t" >/dev/null || { echo "FAIL - $t is missing (make deps installs it)"; exit 1; }
done
B=(buildah --root "$cache/storage" --runroot "$work/run" --storage-driver vfs)
# One build at a time in the cache's storage.
exec 9>"$cache/lock"
flock 9

# The base images the Dockerfile names, from Debian's packages.
if ! "${B[@]}" inspect --type image docker.io/library/debian:bookworm >/dev/null 2>&1; then
    mmdebstrap --quiet --variant=minbase --format=tar bookworm "$work/base.tar" >"$work/base.log" 2>&1 ||
        { fail "mmdebstrap makes the base: $(tail -3 "$work/base.log")"; exit 1; }
    c=$("${B[@]}" from scratch) && mnt=$("${B[@]}" mount "$c") && tar -C "$mnt" -xf "$work/base.tar" &&
        "${B[@]}" umount "$c" >/dev/null && "${B[@]}" commit -q "$c" docker.io/library/debian:bookworm >/dev/null &&
        "${B[@]}" rm "$c" >/dev/null || { fail "the base image is committed"; exit 1; }
    rm -f "$work/base.tar"
fi
"${B[@]}" tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim

t0=$SECONDS
"${B[@]}" bud --isolation chroot --network host --pull-never --layers -f "$ROOT/deploy/Dockerfile" \
    -t localhost/gpuquota:dockerfile "$ROOT" >"$work/bud.log" 2>&1 ||
    { fail "buildah bud -f deploy/Dockerfile: $(grep -v '^ ' "$work/bud.log" | tail -5)"; exit 1; }
pass "deploy/Dockerfile builds in $((SECONDS - t0)) s"
check "the image runs as 65532:65532" "65532:65532" \
    "$("${B[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' localhost/gpuquota:dockerfile)"
c=$("${B[@]}" from --pull-never localhost/gpuquota:dockerfile)
version=$(sed -n 's/^project(gpuquota VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
out=$("${B[@]}" run --isolation chroot "$c" -- /usr/local/bin/gpuquota version 2>&1)
case $out in *"$version"*) pass "its gpuquota runs, every library found: $out" ;;
*) fail "its gpuquota runs: $out" ;; esac
check "as the image's user" "65532" "$("${B[@]}" run --isolation chroot "$c" -- /usr/bin/id -u 2>&1)"
"${B[@]}" rm "$c" >/dev/null
# Keep the base images and the newest build's layers, no older ones.
"${B[@]}" rmi --prune >/dev/null 2>&1 || true
if ((failures)); then
    echo "$failures check(s) failed"
    exit 1
fi
echo "dockerfile: ok"
