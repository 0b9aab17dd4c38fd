#!/usr/bin/env bash
# The release archive of gpuquota for this machine's platform:
#   OUT-DIR/gpuquota-v<version>-<os>-<arch>.tar.gz
# holding the one file gpuquota (krew installs it as kubectl-gpuquota;
# docs/kubectl-plugin.md). The archive is byte-for-byte the same for the same
# binary (sorted, owner 0, mtime 0, gzip without a name or time).
# With MANIFEST (deploy/krew/gpuquota.yaml), the manifest is printed with
# this platform's sha256 set to the archive's checksum, the rest unchanged.
#
# Usage: scripts/release-archive.sh GPUQUOTA OUT-DIR [MANIFEST]
set -euo pipefail
gq=${1:?usage: release-archive.sh GPUQUOTA OUT-DIR [MANIFEST]}
out=${2:?usage: release-archive.sh GPUQUOTA OUT-DIR [MANIFEST]}
manifest=${3:-}
version=v$("$gq" version | sed -n 's/^gpuquota //p')
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "release-archive: no version from $gq" >&2; exit 1; }
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) echo "release-archive: unknown machine $(uname -m)" >&2; exit 1 ;;
esac
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
