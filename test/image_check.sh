#!/usr/bin/env bash
# The container image (scripts/build-image.sh) as an operator's runtime
# meets it: an OCI archive skopeo reads, user 65532, entrypoint gpuquota;
# unpacked by umoci into a runtime bundle and run by runc with a read-only
# root filesystem, as the Deployments run it (deploy/webhook.yaml). It
# prints its version, and cannot write its root; a second build from scratch
# gives the same bytes.
#
#   test/image_check.sh WORKDIR
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
work=${1:?usage: image_check.sh WORKDIR}
rm -rf "$work"
mkdir -p "$work"
failures=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
check() { if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }

GQ_IMAGE_BUILD=$work/build "$ROOT/scripts/build-image.sh" "$work/gpuquota.tar" || { fail "the image builds"; exit 1; }
# The same tree gives the same bytes: a second build, from a build directory
# of its own (the binary compiled again), is identical.
GQ_IMAGE_BUILD=$work/build2 "$ROOT/scripts/build-image.sh" "$work/again.tar" >"$work/again.log" 2>&1 ||
    fail "the image builds a second time: $(tail -3 "$work/again.log")"
check "a second build from scratch gives the same bytes" "$(sha256sum <"$work/gpuquota.tar")" \
    "$(sha256sum <"$work/again.tar" 2>/dev/null)"
echo "# the archive: $(stat -c %s "$work/gpuquota.tar") bytes"
inspect=$(skopeo inspect --config oci-archive:"$work/gpuquota.tar" 2>&1)
check "skopeo reads the archive: user" "65532:65532" "$(jq -r .config.User <<<"$inspect")"
check "entrypoint" '["/usr/bin/gpuquota"]' "$(jq -c .config.Entrypoint <<<"$inspect")"
mkdir -p "$work/layout"
tar -xf "$work/gpuquota.tar" -C "$work/layout"
tag=$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' "$work/layout/index.json")
umoci unpack --image "$work/layout:$tag" "$work/bundle" >/dev/null || { fail "umoci unpacks it"; exit 1; }
check "no shell in the image" "" "$(ls "$work/bundle/rootfs/bin/sh" "$work/bundle/rootfs/usr/bin/sh" 2>/dev/null)"
# run ARGS...: gpuquota ARGS in the image under runc, read-only root.
run() {
    python3 - "$work/bundle/config.json" "$@" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["root"]["readonly"] = True
c["process"]["terminal"] = False
c["process"]["args"] = ["/usr/bin/gpuquota"] + sys.argv[2:]
json.dump(c, open(p, "w"))
PY
    (cd "$work/bundle" && timeout 60 runc run "gq-image-check-$$-$RANDOM" 2>&1)
}
check "runc runs it as user 65532" "65532" \
    "$(jq -r '.process.user.uid' "$work/bundle/config.json")"
check "it starts: gpuquota version" "gpuquota $(sed -n 's/^project(gpuquota VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")" "$(run version)"
out=$(run certs generate --service s --namespace n --out /certs)
[[ $out == *"Read-only file system"* || $out == *"Permission denied"* ]] &&
    pass "its root is read-only" || fail "its root is read-only: [$out]"
check "it renders its default configuration" "backend: aliyun" "$(run config default | head -1)"
rm -rf "$work/bundle" "$work/layout" "$work/build" "$work/build2" "$work/again.tar"
if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "image: ok"
