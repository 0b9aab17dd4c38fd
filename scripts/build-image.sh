#!/usr/bin/env bash
# gpuquota's container image as an OCI archive, from Debian's packages alone
# (no registry is reached): the runtime libraries the binary links, extracted
# by mmdebstrap from bookworm, no shell, no package manager; the binary built
# optimised from this tree; user 65532; assembled with umoci. The same tree
# gives the same bytes (SOURCE_DATE_EPOCH: the last commit's time).
#
#   scripts/build-image.sh OUT.tar [TAG]     (make image; TAG default: the version)
#
# The archive is an OCI image layout in a tar ("oci-archive"): skopeo copy
# oci-archive:OUT.tar docker://REGISTRY/gpuquota:TAG pushes it, ctr -n k8s.io
# images import OUT.tar and podman load -i OUT.tar load it (docs/install.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build-image.sh OUT.tar [TAG]}
version=$(sed -n 's/^project(gpuquota VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
tag=${2:-$version}
for t in mmdebstrap umoci; do
    command -v "$t" >/dev/null || { echo "build-image.sh: $t is missing (make deps installs it)" >&2; exit 2; }
done
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH=$epoch
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
build=${GQ_IMAGE_BUILD:-$ROOT/build-image}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The binary, optimised, without debug paths of this machine in it.
cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGQ_E2E=OFF -DGQ_BENCH=OFF \
    -DCMAKE_C_FLAGS="-ffile-prefix-map=$ROOT=." >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target gpuquota -- --no-print-directory >/dev/null

# The runtime libraries gpuquota links (ldd of the binary), as Debian ships them.
rootfs=$work/rootfs
mmdebstrap --quiet --variant=extract \
    --include=libjson-c5,libyaml-0-2,libcurl4,libmicrohttpd12,libgnutls30,libssl3 \
    bookworm "$rootfs" >/dev/null
rm -rf "$rootfs"/usr/share/{doc,locale,man,lintian} "$rootfs"/var/cache/* "$rootfs"/var/lib/apt
install -D -m 0755 "$build/gpuquota" "$rootfs/usr/bin/gpuquota"
strip "$rootfs/usr/bin/gpuquota"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
# Every library the binary needs is in the image, found by its own loader.
if chroot "$rootfs" /lib64/ld-linux-x86-64.so.2 --list /usr/bin/gpuquota | grep -q 'not found'; then
    echo "build-image.sh: a library gpuquota needs is missing from the image" >&2
    chroot "$rootfs" /lib64/ld-linux-x86-64.so.2 --list /usr/bin/gpuquota >&2
    exit 1
fi
find "$rootfs" -exec touch -h -d "@$epoch" {} +

oci=$work/oci
umoci init --layout "$oci"
umoci new --image "$oci:$tag"
umoci insert --image "$oci:$tag" --history.created "$created" --history.created_by "scripts/build-image.sh" \
    "$rootfs" /
umoci config --image "$oci:$tag" --config.user 65532:65532 --config.entrypoint /usr/bin/gpuquota \
    --config.workingdir / --os linux --architecture amd64 --created "$created" \
    --history.created "$created" --history.created_by "scripts/build-image.sh" \
    --config.label "org.opencontainers.image.title=gpuquota" \
    --config.label "org.opencontainers.image.version=$version"
umoci gc --layout "$oci"
mkdir -p "$(dirname "$out")"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$oci" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "$out: gpuquota $tag, $(du -k "$out" | cut -f1) KiB, sha256 $(sha256sum "$out" | cut -c1-64)"
