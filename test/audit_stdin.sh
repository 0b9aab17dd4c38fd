#!/bin/sh
# audit_stdin.sh GPUQUOTA DATA_DIR: `gpuquota audit` on standard input, with a
# line longer than 1 MiB and binary garbage among the records.
set -eu
bin=$1 data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
    head -c 1100000 /dev/zero | tr '\0' 'x'
    echo
    cat "$data/gpuquota.log"
    printf '\377\000\001{"webhook":\000}\n'
    head -c 2000000 /dev/zero | tr '\0' '{'
} >"$tmp/in"
"$bin" audit -o summary <"$tmp/in" >"$tmp/out" 2>"$tmp/err"
cat "$tmp/out" "$tmp/err"
grep -Eq '^TOTAL +4 +3 +0 +24Gi ' "$tmp/out"
grep -q '^gpuquota audit: 7 records read; skipped 1 malformed lines, 2 lines longer than 1048576 bytes, 0 lines' "$tmp/err"
# "-" reads standard input too.
"$bin" audit -o summary - <"$data/gpuquota.log" | grep -Eq '^TOTAL +4 +3 +0 +24Gi '
echo ok
