#!/usr/bin/env bash
# The release archive of gpuquota for one platform:
#   OUT-DIR/gpuquota-v<version>-<os>-<arch>.tar.gz
# holding the one file gpuquota (krew installs it as kubectl-gpuquota;
# docs/kubectl-plugin.md). The archive is byte-for-byte the same for the same
# binary (sorted, owner 0, mtime 0, gzip without a name or time).
# With MANIFEST (deploy/krew/gpuquota.yaml), the manifest is printed with
# this platform's sha256 set to the archive's checksum, the rest unchanged.
#
# The platform is this machine's and the version the binary's own (`gpuquota
# version`), unless --arch and --version name them: a cross-built binary does
# not run here (scripts/release.sh). Either way the binary's ELF machine must
# be the platform's architecture.
#
# Usage: scripts/release-archive.sh [--arch amd64|arm64 --version vX.Y.Z] GPUQUOTA OUT-DIR [MANIFEST]
set -euo pipefail
usage="usage: release-archive.sh [--arch amd64|arm64 --version vX.Y.Z] GPUQUOTA OUT-DIR [MANIFEST]"
arch= version=
while [[ ${1:-} == --* ]]; do
    case $1 in
    --arch) arch=${2:?$usage} ;;
    --version) version=${2:?$usage} ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift 2
done
gq=${1:?$usage}
out=${2:?$usage}
manifest=${3:-}
[[ -f $gq ]] || { echo "release-archive: no binary $gq" >&2; exit 1; }
[[ -n $version ]] || version=v$("$gq" version | sed -n 's/^gpuquota //p')
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "release-archive: no version from $gq" >&2; exit 1; }
os=linux
if [[ -z $arch ]]; then
    case $(uname -m) in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "release-archive: unknown machine $(uname -m)" >&2; exit 1 ;;
    esac
fi
# ELF e_machine (bytes 18-19, little-endian): 0x3e x86-64, 0xb7 AArch64.
case $arch in
amd64) want="3e 00" ;;
arm64) want="b7 00" ;;
*) echo "release-archive: unknown architecture $arch (amd64 or arm64)" >&2; exit 2 ;;
esac
machine=$(od -An -tx1 -j18 -N2 "$gq" | xargs)
[[ $(head -c4 "$gq" | od -An -c | xargs) == "177 E L F" && $machine == "$want" ]] ||
    { echo "release-archive: $gq is not a linux/$arch ELF binary (e_machine: ${machine:-none})" >&2; exit 1; }
name=gpuquota-$version-$os-$arch.tar.gz
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$gq" "$stage/gpuquota"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - gpuquota |
    gzip -9 -n >"$out/$name"
echo "release-archive: $out/$name" >&2
[[ -n $manifest ]] || exit 0
sum=$(sha256sum "$out/$name" | cut -d' ' -f1)
# The sha256 line that follows this archive's uri line.
awk -v name="/$name" -v sum="$sum" '
    index($0, "uri:") && substr($0, length($0) - length(name) + 1) == name { hit = 1 }
    hit && $1 == "sha256:" { sub(/sha256:.*/, "sha256: \"" sum "\""); hit = 0; done = 1 }
    { print }
    END { if (!done) { print "release-archive: no platform of the manifest has uri .../" substr(name, 2) > "/dev/stderr"; exit 1 } }
' "$manifest"
