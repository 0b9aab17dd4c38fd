#!/usr/bin/env bash
# `make release` (scripts/release.sh) into a folder of its own, and what it
# wrote, as whoever publishes or installs it meets it: every artifact there,
# SHA256SUMS naming exactly them and verified by `sha256sum -c`; the krew
# manifest passes krew's validation with every archive's sum
# (test/krew/check.py --release), krew itself (scripts/krew-bin.sh) installs
# it offline from those archives, each platform's entry, and kubectl runs the
# installed plugin; `helm show chart` of the packaged chart has the release version
# and `helm template` of the package renders the objects with the image at
# that version; a second release from the same tree is byte-for-byte the
# same; a changed archive fails both sha256sum -c and the manifest's check.
#
# The image is left out (GQ_RELEASE_IMAGE=0; the image_runs_under_runc test
# builds and runs it, twice) unless --image is given: then it is in
# SHA256SUMS too and skopeo reads the archive at the release's version.
# linux/arm64 is built when Debian's cross toolchain is installed (make
# release ARM64=1 installs it), as make release does.
#
#   test/krew/release.sh WORKDIR [--image]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:?usage: release.sh WORKDIR [--image]}
image=${2:-}
failures=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
check() { if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }
bin=$("$ROOT/scripts/k8s-bin.sh" --quiet) || { fail "helm and kubectl are built (scripts/k8s-bin.sh)"; exit 1; }
helm=$bin/helm
krew=$("$ROOT/scripts/krew-bin.sh") || { fail "krew is built (scripts/krew-bin.sh)"; exit 1; }
export HELM=$helm GQ_RELEASE_WORK=$work/tree
[[ $image == --image ]] || export GQ_RELEASE_IMAGE=0
v=$(sed -n 's/^project(gpuquota VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
# The build tree stays between runs, so that a second run compiles nothing.
rm -rf "$work/out" "$work/again" "$work/noarm" "$work/krew" "$work/bad" "$work"/krew-*
mkdir -p "$work"

"$ROOT/scripts/release.sh" "$work/out" >"$work/release.log" 2>&1 ||
    { fail "scripts/release.sh runs: $(tail -5 "$work/release.log")"; exit 1; }
pass "scripts/release.sh runs"
grep '^release: ' "$work/release.log" | sed 's/^/# /'
want=("gpuquota-v$v-linux-amd64.tar.gz" "gpuquota-$v.tgz" gpuquota.yaml)
grep -q "arch: arm64" "$work/out/gpuquota.yaml" && want+=("gpuquota-v$v-linux-arm64.tar.gz")
[[ $image == --image ]] && want+=("gpuquota-image-v$v-linux-amd64.tar")
for f in "${want[@]}" SHA256SUMS; do
    [[ -s $work/out/$f ]] && pass "$f is there ($(stat -c %s "$work/out/$f") bytes)" || fail "$f is there"
done
if command -v aarch64-linux-gnu-gcc >/dev/null; then
    [[ " ${want[*]} " == *linux-arm64* ]] && pass "the arm64 toolchain is here: linux/arm64 is in the release" ||
        fail "the arm64 toolchain is here, but linux/arm64 is not in the release"
    # ARM64=0: the release without arm64, its manifest without the entry.
    # (without the image, whatever this run builds: the check is on the platforms)
    if ARM64=0 GQ_RELEASE_IMAGE=0 "$ROOT/scripts/release.sh" "$work/noarm" >"$work/noarm.log" 2>&1; then
        grep -q "linux/arm64 left out (ARM64=0)" "$work/noarm.log" && pass "ARM64=0: the release says arm64 is left out" ||
            fail "ARM64=0: the release says arm64 is left out: $(cat "$work/noarm.log")"
        check "ARM64=0: the manifest's platforms" "amd64" \
            "$(python3 -c 'import sys, yaml; print(" ".join(p["selector"]["matchLabels"]["arch"] for p in yaml.safe_load(open(sys.argv[1]))["spec"]["platforms"]))' "$work/noarm/gpuquota.yaml")"
        check "ARM64=0: SHA256SUMS" "gpuquota-$v.tgz gpuquota-v$v-linux-amd64.tar.gz gpuquota.yaml" \
            "$(cut -c67- "$work/noarm/SHA256SUMS" | sort | xargs)"
        python3 "$ROOT/test/krew/check.py" --release "$work/noarm" "$work/krew" >"$work/krew.log" 2>&1 &&
            pass "ARM64=0: the manifest passes the krew check" || fail "ARM64=0: the krew check: $(grep FAIL "$work/krew.log")"
    else
        fail "ARM64=0: scripts/release.sh runs: $(tail -5 "$work/noarm.log")"
    fi
    if command -v qemu-aarch64 >/dev/null; then
        mkdir -p "$work/arm64"
        tar -xzf "$work/out/gpuquota-v$v-linux-arm64.tar.gz" -C "$work/arm64"
        arm() { qemu-aarch64 /lib/ld-linux-aarch64.so.1 "$work/arm64/gpuquota" "$@" 2>&1; }
        check "the arm64 binary of the archive runs (qemu-aarch64): version" "gpuquota $v" "$(arm version)"
        check "it renders its default configuration" "backend: aliyun" "$(arm config default | head -1)"
        rm -rf "$work/arm64"
    else
        echo "# the arm64 binary is not run: no qemu-aarch64 here"
    fi
else
    grep -q "linux/arm64 left out: missing" "$work/release.log" &&
        pass "without the arm64 toolchain, linux/arm64 is left out and the release says what is missing" ||
        fail "without the arm64 toolchain, the release says why linux/arm64 is left out"
fi
check "SHA256SUMS names exactly the artifacts" "$(printf '%s\n' "${want[@]}" | sort)" \
    "$(cut -c67- "$work/out/SHA256SUMS" | sort)"
sums=$(cd "$work/out" && sha256sum -c SHA256SUMS 2>&1) && pass "sha256sum -c SHA256SUMS" ||
    fail "sha256sum -c SHA256SUMS: $sums"

if python3 "$ROOT/test/krew/check.py" --release "$work/out" "$work/krew" >"$work/krew.log" 2>&1; then
    pass "the krew manifest installs from the release's archives (test/krew/check.py --release)"
else
    fail "the krew manifest installs from the release's archives:"
    grep FAIL "$work/krew.log" | sed 's/^FAIL - /  /'
fi

# krew itself, offline (no network namespace of its own when unshare cannot
# make one): KREW_ROOT=DIR krew install --manifest M --archive A, KREW_ARCH
# choosing the platform entry.
krew_install() { # krew_install ROOT ARCH RELEASE-DIR
    local net=(unshare -n)
    "${net[@]}" true 2>/dev/null || net=()
    KREW_ROOT=$1 KREW_OS=linux KREW_ARCH=$2 "${net[@]}" "$krew" install --manifest="$3/gpuquota.yaml" \
        --archive="$3/gpuquota-v$v-linux-$2.tar.gz" </dev/null 2>&1
}
if out=$(krew_install "$work/krew-amd64" amd64 "$work/out"); then
    pass "krew install --manifest gpuquota.yaml --archive gpuquota-v$v-linux-amd64.tar.gz"
else
    fail "krew install from the release's amd64 archive: $(tail -5 <<<"$out")"
fi
# krew list needs the index, which is not fetched offline: its receipt.
check "krew's receipt: gpuquota at the release's version" "v$v" \
    "$(sed -n 's/^  version: //p' "$work/krew-amd64/receipts/gpuquota.yaml" 2>&1)"
check "kubectl finds the plugin in krew's bin: kubectl gpuquota version" "gpuquota $v" \
    "$(PATH=$work/krew-amd64/bin:$PATH "$bin/kubectl" gpuquota version 2>&1)"
if [[ " ${want[*]} " == *linux-arm64* ]]; then
    out=$(krew_install "$work/krew-arm64" arm64 "$work/out") &&
        pass "krew install of the arm64 entry (KREW_ARCH=arm64)" || fail "krew install of the arm64 entry: $(tail -5 <<<"$out")"
    check "krew installed an AArch64 binary" "b7 00" \
        "$(od -An -tx1 -j18 -N2 "$work/krew-arm64/bin/kubectl-gpuquota" 2>&1 | xargs)"
fi

chart=$work/out/gpuquota-$v.tgz
shown=$("$helm" show chart "$chart" 2>&1)
check "helm show chart: the version" "$v" "$(sed -n 's/^version: //p' <<<"$shown")"
check "helm show chart: appVersion, the image tag it installs" "$v" \
    "$(sed -n 's/^appVersion: //p' <<<"$shown" | tr -d '"')"
if "$helm" template gpuquota "$chart" -n gpuquota-system --include-crds >"$work/rendered.yaml" 2>"$work/err"; then
    pass "helm template of the packaged chart renders"
    kinds=$(python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
print(" ".join(sorted({d["kind"] for d in docs})))
for d in docs:
    if d["kind"] == "Deployment":
        for c in d["spec"]["template"]["spec"]["containers"]:
            print(d["metadata"]["name"], c["image"])' "$work/rendered.yaml")
    for k in CustomResourceDefinition Deployment Service MutatingWebhookConfiguration \
        ValidatingWebhookConfiguration; do
        [[ $(head -1 <<<"$kinds") == *"$k"* ]] && pass "it renders a $k" || fail "it renders a $k: [$(head -1 <<<"$kinds")]"
    done
    images=$(tail -n +2 <<<"$kinds" | awk '{print $2}' | sort -u)
    check "every Deployment runs the image at the release's version" "ghcr.io/gpuquota/gpuquota:$v" "$images"
else
    fail "helm template of the packaged chart renders: $(tail -5 "$work/err")"
fi

if [[ $image == --image ]]; then
    cfg=$(skopeo inspect --config oci-archive:"$work/out/gpuquota-image-v$v-linux-amd64.tar" 2>&1)
    check "skopeo reads the image archive: its version label" "$v" \
        "$(jq -r '.config.Labels["org.opencontainers.image.version"]' <<<"$cfg" 2>/dev/null)"
fi

# The same tree gives the same bytes, the chart (packaged anew, at another
# time) included.
"$ROOT/scripts/release.sh" "$work/again" >"$work/again.log" 2>&1 ||
    fail "scripts/release.sh runs a second time: $(tail -5 "$work/again.log")"
check "a second release from the same tree: the same SHA256SUMS" "$(cat "$work/out/SHA256SUMS")" \
    "$(cat "$work/again/SHA256SUMS" 2>/dev/null)"

# What is checked is checked: one byte of the amd64 archive changed.
cp -r "$work/out" "$work/bad"
printf '\0' | dd of="$work/bad/gpuquota-v$v-linux-amd64.tar.gz" bs=1 seek=100 conv=notrunc status=none
(cd "$work/bad" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1) &&
    fail "sha256sum -c catches a changed archive" || pass "sha256sum -c catches a changed archive"
out=$(python3 "$ROOT/test/krew/check.py" --release "$work/bad" "$work/krew" 2>&1)
grep -q "^FAIL - gpuquota-v$v-linux-amd64.tar.gz: the manifest's sha256 is the archive's" <<<"$out" &&
    pass "the krew check catches it too" || fail "the krew check catches a changed archive: $(tail -3 <<<"$out")"
out=$(krew_install "$work/krew-bad" amd64 "$work/bad") && fail "krew refuses the changed archive: it installed it" ||
    { grep -q "checksum does not match" <<<"$out" && [[ ! -e $work/krew-bad/bin/kubectl-gpuquota ]] &&
        pass "krew refuses the changed archive (checksum does not match), installs nothing" ||
        fail "krew refuses the changed archive: [$(tail -3 <<<"$out")]"; }
msg=$("$ROOT/scripts/release-archive.sh" --arch arm64 --version "v$v" "$work/tree/linux-amd64/gpuquota" \
    "$work/bad" 2>&1) && fail "release-archive.sh refuses an amd64 binary as arm64" ||
    check "release-archive.sh refuses an amd64 binary as arm64" \
        "release-archive: $work/tree/linux-amd64/gpuquota is not a linux/arm64 ELF binary (e_machine: 3e 00)" "$msg"
msg=$("$ROOT/scripts/release.sh" 2>&1) && fail "release.sh without OUT-DIR fails" ||
    check "release.sh without OUT-DIR says how to run it" "usage: scripts/release.sh OUT-DIR (make release)" "$msg"
rm -rf "$work/bad" "$work/again" "$work/noarm" "$work/krew" "$work"/krew-*
if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "release: ok"
