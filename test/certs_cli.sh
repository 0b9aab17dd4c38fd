#!/usr/bin/env bash
# `gpuquota certs`: exit codes and the expiry report.
set -uo pipefail
gq=$1
d=$(mktemp -d /tmp/gq-certs-cli.XXXXXX)
trap 'rm -rf "$d"' EXIT
failures=0
check() { if [[ "$2" == "$3" ]]; then echo "ok   - $1"; else echo "FAIL - $1: expected [$2], got [$3]"; failures=$((failures + 1)); fi; }

"$gq" certs generate --service wh --namespace ns --out "$d" --days 10 --ca-days 100 >/dev/null
check "generate exits 0" 0 $?
"$gq" certs inspect "$d/tls.crt" --warn-days 5 >"$d/out"
check "10 days left, warn at 5: exit 0" 0 $?
# 10 days, or 9 when the clock ticked between generate and inspect.
check "days left reported" 1 "$(grep -cE '^  days left:  (9|10)$' "$d/out")"
"$gq" certs inspect "$d/tls.crt" --warn-days 11 >"$d/out"
check "10 days left, warn at 11: exit 1" 1 $?
check "status says so" "  status:     EXPIRES SOON" "$(grep status "$d/out")"
"$gq" certs inspect "$d/ca.crt" "$d/tls.crt" --warn-days 11 >/dev/null
check "any certificate within warn-days fails the run" 1 $?
"$gq" certs inspect "$d/ca.crt" >/dev/null
check "CA with 100 days left, default warn 30: exit 0" 0 $?
"$gq" certs inspect "$d/tls.key" >/dev/null 2>&1
check "not a certificate: exit 2" 2 $?
"$gq" certs generate --service wh --namespace ns >/dev/null 2>&1
check "missing --out: exit 2" 2 $?
"$gq" certs generate --service wh --namespace ns --out "$d" --days 0 >/dev/null 2>&1
check "--days 0: exit 2" 2 $?
"$gq" certs generate --service wh --namespace ns --out "$d/none" --rotate >/dev/null 2>&1
check "--rotate without a CA: exit 2" 2 $?
"$gq" certs generate --service wh --namespace ns --out "$d/fresh" >/dev/null 2>&1
check "a missing --out directory is created" 0 $?
check "created private" 700 "$(stat -c %a "$d/fresh")"
check "and filled" "ca.crt ca.key tls.crt tls.key" "$(cd "$d/fresh" && echo *)"
"$gq" certs generate --service wh --namespace ns --out "$d/no/such/parent" >/dev/null 2>"$d/err"
check "a missing parent: exit 2" 2 $?
check "with the reason" 1 "$(grep -c 'no/such/parent: No such file or directory' "$d/err")"
"$gq" certs frobnicate >/dev/null 2>&1
check "unknown action: exit 2" 2 $?
echo "$failures failure(s)"
[[ $failures -eq 0 ]]
