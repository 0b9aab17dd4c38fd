#!/usr/bin/env bash
# `gpuquota certs inject` end to end: deploy/webhooks.yaml applied with
# kubectl to the kube-apiserver stand-in, the CA injected, read back with
# kubectl; idempotence, an injected 409, dry run, missing configurations,
# bad CA files. Usage: certs_inject.sh GPUQUOTA KUBE-STANDIN
set -uo pipefail
gq=$1
standin=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gq-certs-inject.XXXXXX)
source "$root/test/integration_lib.sh"
source "$root/test/standin_lib.sh"
stat_of() { curl -sS "$S/standin/stats" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
bundles() { k get "$1" gpuquota -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}'; }
rv() { k get "$1" gpuquota -o jsonpath='{.metadata.resourceVersion}'; }
M=mutatingwebhookconfiguration
V=validatingwebhookconfiguration

k apply -f "$root/deploy/webhooks.yaml" >/dev/null || { echo "webhooks.yaml not applied"; exit 1; }
"$gq" certs generate --service gpuquota-webhook --namespace gpuquota-system --out "$work/a" \
    >"$work/gen.out" || { echo "certs generate failed"; exit 1; }
check "generate of a new CA points at inject" \
    "the caBundle changed: run gpuquota certs inject --ca $work/a/ca.crt" "$(tail -1 "$work/gen.out")"
"$gq" certs generate --service gpuquota-webhook --namespace gpuquota-system --out "$work/b" \
    >/dev/null || { echo "certs generate failed"; exit 1; }
b64a=$(base64 -w0 <"$work/a/ca.crt")
b64b=$(base64 -w0 <"$work/b/ca.crt")

# ------------------------------------------------------------- dry run
out=$("$gq" certs inject --ca "$work/a/ca.crt" --dry-run 2>&1)
check "dry run exits 0" 0 $?
check "dry run says what would change" \
    "$M/gpuquota: caBundle would be updated (1 of 1 webhook) (dry run)
$V/gpuquota: caBundle would be updated (3 of 3 webhooks) (dry run)" "$out"
check "dry run writes nothing" "" "$(bundles $V | tr -d '\n')"

# ------------------------------------------------------------- inject
out=$("$gq" certs inject --ca "$work/a/ca.crt" 2>&1)
check "inject exits 0" 0 $?
check "one line per configuration" \
    "$M/gpuquota: caBundle updated (1 webhook)
$V/gpuquota: caBundle updated (3 webhooks)" "$out"
check "mutating entry carries the CA" "$b64a" "$(bundles $M)"
check "every validating entry carries the CA" "$b64a
$b64a
$b64a" "$(bundles $V)"
check "the bundle decodes to the CA file" "$(cat "$work/a/ca.crt")" \
    "$(k get $V gpuquota -o jsonpath='{.webhooks[1].clientConfig.caBundle}' | base64 -d)"
check "the rest of the object is kept" "/validate Fail NoneOnDryRun" \
    "$(k get $V gpuquota -o jsonpath='{.webhooks[0].clientConfig.service.path} {.webhooks[0].failurePolicy} {.webhooks[0].sideEffects}')"

# ------------------------------------------------------------- idempotent
rvm=$(rv $M) rvv=$(rv $V) updates=$(stat_of update)
out=$("$gq" certs inject --ca "$work/a/ca.crt" --kubeconfig "$KUBECONFIG" 2>&1)
check "second run exits 0" 0 $?
check "second run says unchanged" \
    "$M/gpuquota: caBundle unchanged (1 webhook)
$V/gpuquota: caBundle unchanged (3 webhooks)" "$out"
check "no PUT on an unchanged bundle" "$updates" "$(stat_of update)"
check "mutating resourceVersion kept" "$rvm" "$(rv $M)"
check "validating resourceVersion kept" "$rvv" "$(rv $V)"

# ------------------------------------------------------------- 409 retried
fault '{"fail":{"count":1,"code":409,"method":"PUT"}}'
out=$("$gq" certs inject --ca "$work/b/ca.crt" 2>&1)
check "a 409 is retried: exit 0" 0 $?
check "and reported" "$M/gpuquota: caBundle updated (1 webhook) after 1 conflict
$V/gpuquota: caBundle updated (3 webhooks)" "$out"
check "new CA in the mutating entry" "$b64b" "$(bundles $M)"
check "new CA in every validating entry" "$b64b
$b64b
$b64b" "$(bundles $V)"

# 409 on every attempt: bounded, exit 1, the other configuration still done
fault '{"fail":{"count":5,"code":409,"method":"PUT","pathPrefix":"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"}}'
"$gq" certs inject --ca "$work/a/ca.crt" >"$work/out" 2>"$work/err"
check "persistent conflicts: exit 1" 1 $?
check "reported on stderr" 1 "$(grep -c "^gpuquota certs inject: $M/gpuquota: .*injected fault (HTTP 409)" "$work/err")"
check "the validating configuration is still updated" "$V/gpuquota: caBundle updated (3 webhooks)" \
    "$(cat "$work/out")"
curl -sS -X POST "$S/standin/reset" >/dev/null

# ------------------------------------------------------------- API errors
fault '{"fail":{"count":2,"code":403,"method":"GET"}}'
"$gq" certs inject --ca "$work/b/ca.crt" >/dev/null 2>"$work/err"
check "forbidden: exit 1" 1 $?
check "both configurations report the error" 2 "$(grep -c 'injected fault (HTTP 403)' "$work/err")"
curl -sS -X POST "$S/standin/reset" >/dev/null

# ------------------------------------------------------------- missing
k delete $V gpuquota >/dev/null
out=$("$gq" certs inject --ca "$work/a/ca.crt" 2>&1)
check "only one configuration: exit 0" 0 $?
check "the missing one is noted" "$M/gpuquota: caBundle updated (1 webhook)
$V/gpuquota: not found, skipped" "$out"
"$gq" certs inject --ca "$work/b/ca.crt" --name other >"$work/out" 2>"$work/err"
check "neither exists: exit 1" 1 $?
check "says so" "gpuquota certs inject: neither $M/other nor $V/other exists" "$(cat "$work/err")"
check "both noted" 2 "$(grep -c 'not found, skipped' "$work/out")"

# ------------------------------------------------------------- bad input
rvm=$(rv $M)
"$gq" certs inject --ca "$work/a/tls.crt" >/dev/null 2>"$work/err"
check "a serving certificate is refused: exit 2" 2 $?
check "with the reason" 1 "$(grep -c 'is not a CA certificate' "$work/err")"
"$gq" certs inject --ca "$work/a/ca.key" >/dev/null 2>"$work/err"
check "a key file: exit 2" 2 $?
check "with the reason" 1 "$(grep -c 'no PEM certificate found' "$work/err")"
"$gq" certs inject --ca "$work/none.crt" >/dev/null 2>&1
check "a missing CA file: exit 2" 2 $?
"$gq" certs inject >/dev/null 2>&1
check "no --ca: exit 2" 2 $?
"$gq" certs inject --ca "$work/a/ca.crt" --name Bad_Name >/dev/null 2>&1
check "invalid --name: exit 2" 2 $?
"$gq" certs inject --ca "$work/a/ca.crt" extra >/dev/null 2>&1
check "stray argument: exit 2" 2 $?
check "nothing written by refused runs" "$rvm" "$(rv $M)"
"$gq" certs inject --ca "$work/a/ca.crt" --kubeconfig "$work/nokubeconfig" >/dev/null 2>&1
check "unreadable kubeconfig: exit 2" 2 $?

finish
