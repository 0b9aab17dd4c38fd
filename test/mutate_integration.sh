#!/usr/bin/env bash
# Integration tests of /mutate: the real `gpuquota webhook` on an ephemeral
# 127.0.0.1 port with fresh certificates, driven by curl over TLS with
# --cacert and the service DNS name (--resolve), as kube-apiserver calls it.
# Every backend (config files), every example pod and the model-pin and
# affinity cases are sent and compared byte for byte with `gpuquota admit`
# (the same decision offline); the returned patch is applied and the pod
# sent again (reinvocation: no patch). Then exact response shapes, abuse
# (size, malformed and deep JSON, missing uid, content type, slow client,
# plain HTTP, TLS 1.1), a certificate swapped under load with no failed
# request, draining, the audit log (one record per decision, SIGHUP reopen,
# write errors in /metrics).
# Usage: mutate_integration.sh GPUQUOTA TEST_DATA_DIR EXAMPLE_PODS_DIR WRK_LUA
set -uo pipefail
gq=$1
data=$2
examples=$3
lua=$4
work=$(mktemp -d /tmp/gq-mutate-it.XXXXXX)
svc=gpuquota-webhook
ns=gpuquota-system
host=$svc.$ns.svc
source "$(dirname "$0")/integration_lib.sh"
make_certs $svc $ns

json=(-H 'Content-Type: application/json')
# post FILE OUT: POST the review in FILE to /mutate as the API server does
# (with ?timeout=); the body goes to OUT, the HTTP status to stdout.
post() { c "${json[@]}" --data-binary @"$1" -o "$2" -w '%{http_code}' '/mutate?timeout=10s'; }
# patch_of RESPONSE: the decoded JSON Patch of an AdmissionReview response
# ("" when it has none).
patch_of() { sed -n 's/.*"patch":"\([^"]*\)".*/\1/p' "$1" | base64 -d; }
# lines_soon FILE N: the line count of FILE once it reaches N (the audit
# writer thread appends shortly after the answer), or after 3 s.
lines_soon() {
    local n=0
    for _ in $(seq 30); do
        n=$(wc -l <"$1" 2>/dev/null || echo 0)
        [[ $n -ge $2 ]] && break
        sleep 0.1
    done
    echo "$n"
}
# escape TEXT: as a JSON string body.
escape() { sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$1"; }

# start_webhook CONFIG LOG: gpuquota webhook with CONFIG; sets pid, port.
start_webhook() {
    start "$2" "$gq" webhook --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" \
        --listen 127.0.0.1:0 --threads 2 --config "$1"
}

# ------------------------------------------------- every backend, every pod
# The example pods, the pin and affinity cases, and the request forms the
# examples do not show (pod annotations, HAMi percentage, KAI memory, slices
# on several GPUs, MIG input, a pod already in a backend's resources).
pods=("$examples"/*.yaml "$data"/mutate/pin-a100-selector.yaml
      "$data"/mutate/pin-a10-annotation.yaml "$data"/mutate/affinity-merge.yaml)
for f in ann-fraction ann-memory-container hami-percent kai-memory memory-x2-a100 mig-input \
    backend-volcano zero-every-form zero-annotations zero-gpu-with-memory forged-shared-bare; do
    pods+=("$data/pods/$f.json")
done
for cfg_in in "$data"/mutate/{aliyun,hami,volcano,mig,timeslicing}.yaml; do
    b=$(basename "$cfg_in" .yaml)
    cfg=$work/$b.yaml
    { cat "$cfg_in"; printf 'audit:\n  path: %s\n' "$work/audit-$b.log"; } >"$cfg"
    start_webhook "$cfg" "$work/webhook-$b.log"
    wh=$pid
    sent=0 allowed=0 denied=0 same=0 reinvoked=0
    for pod in "${pods[@]}"; do
        name=$(basename "$pod")
        name=${name%.*}
        uid="$b-$name"
        "$gq" admit --review-only --uid "$uid" "$pod" >"$work/review.json"
        code=$(post "$work/review.json" "$work/resp.json")
        sent=$((sent + 1))
        [[ "$code" == 200 ]] || { fail "$b $name: HTTP $code"; continue; }
        st=0
        "$gq" admit --config "$cfg" --uid "$uid" -o patch "$pod" >"$work/want.patch" 2>/dev/null ||
            st=$?
        if [[ $st -eq 0 ]]; then
            allowed=$((allowed + 1))
            grep -q '"allowed":true' "$work/resp.json" || fail "$b $name: not allowed"
            got=$(patch_of "$work/resp.json")
            [[ -z "$got" ]] && got='[]'
            if [[ "$got" == "$(cat "$work/want.patch")" ]]; then
                same=$((same + 1))
            else
                fail "$b $name: server patch differs from gpuquota admit's: $got"
            fi
            # Reinvocation: the API server applies the patch and calls again
            # with the same uid; nothing is left to change.
            printf '%s' "$got" >"$work/got.patch"
            "$gq" admit --review-only --uid "$uid" --patch "$work/got.patch" "$pod" \
                >"$work/review2.json"
            code=$(post "$work/review2.json" "$work/resp2.json")
            sent=$((sent + 1))
            head=$(head -c 200 "$work/resp2.json")
            want="{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"$uid\",\"allowed\":true"
            if [[ "$code" == 200 && "$head" == "$want"* ]] && ! grep -q '"patch' "$work/resp2.json"; then
                reinvoked=$((reinvoked + 1))
            else
                fail "$b $name: reinvocation: HTTP $code $(cat "$work/resp2.json")"
            fi
        else
            denied=$((denied + 1))
            msg=$("$gq" admit --config "$cfg" "$pod" | sed -n 's/^reason: //p')
            check "$b $name: denial shape" \
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"$uid\",\"allowed\":false,\"status\":{\"code\":403,\"reason\":\"Forbidden\",\"message\":\"$(escape "$msg")\"}}}" \
                "$(cat "$work/resp.json")"
        fi
    done
    check "$b: every allowed pod patched exactly as gpuquota admit" "$allowed" "$same"
    check "$b: every allowed pod reinvoked without a patch" "$allowed" "$reinvoked"
    pass "$b: $allowed allowed, $denied denied, $reinvoked reinvoked"
    check "$b: one audit record per decision" "$sent" "$(lines_soon "$work/audit-$b.log" "$sent")"
    check "$b: metrics count every allowed decision" \
        "gpuquota_admission_requests_total{webhook=\"mutate\",operation=\"CREATE\",decision=\"allowed\"} $((allowed + reinvoked))" \
        "$(c /metrics | grep 'decision="allowed"')"
    if [[ $b == aliyun ]]; then
        keep_cfg=$cfg keep_pid=$wh keep_port=$port
        continue # stays up for the shape and abuse tests below
    fi
    stop_server "$wh"
    check "$b: SIGTERM exits 0" 0 $?
done

# ------------------------------------------------------- the aliyun server
port=$keep_port
pid=$keep_pid
audit=$work/audit-aliyun.log
log=$work/webhook-aliyun.log

# Model pins, the A10/A100 trap and the merged affinity, over the wire.
"$gq" admit --review-only --uid trap "$data/mutate/pin-a100-selector.yaml" >"$work/r.json"
post "$work/r.json" "$work/o.json" >/dev/null
check "A100 selector is never an A10" '"charged":"gpu-memory=20Gi,gpus=0,gpu-pods=1"' \
    "$(grep -o '"charged":"[^"]*"' "$work/o.json")"
check "A100 selector: model a100-40gb" '"gpu-model":"a100-40gb"' \
    "$(grep -o '"gpu-model":"[^"]*"' "$work/o.json")"
"$gq" admit --review-only --uid pin "$data/mutate/pin-a10-annotation.yaml" >"$work/r.json"
post "$work/r.json" "$work/o.json" >/dev/null
check "A10 pin: affinity on exactly NVIDIA-A10" \
    '{"op":"add","path":"/spec/affinity","value":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"nvidia.com/gpu.product","operator":"In","values":["NVIDIA-A10"]}]}]}}}}' \
    "$(patch_of "$work/o.json" | grep -o '{"op":"add","path":"/spec/affinity",[^]]*]}]}]}}}}')"
"$gq" admit --review-only --uid aff "$data/mutate/affinity-merge.yaml" >"$work/r.json"
post "$work/r.json" "$work/o.json" >/dev/null
check "merged affinity: pin appended to both ORed terms, preferred untouched" \
    '/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/-
/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/1/matchExpressions' \
    "$(patch_of "$work/o.json" | grep -o '"path":"/spec/affinity[^"]*"' | sed 's/"path":"//; s/"$//')"

# Exact shapes: the shared fixture (8 whole H100s) answered with
# apiVersion, kind and uid echoed, the patch in base64.
fx=$data/admissionreview-pod-create.json
code=$(post "$fx" "$work/o.json")
want_patch=$("$gq" admit --config "$keep_cfg" -o patch "$fx" | tr -d '\n' | base64 -w0)
check "fixture: exact response" \
    "200 {\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64\",\"allowed\":true,\"patchType\":\"JSONPatch\",\"patch\":\"$want_patch\",\"auditAnnotations\":{\"charged\":\"gpu-memory=640Gi,gpus=8,gpu-pods=1\",\"backend\":\"aliyun\",\"gpu-model\":\"h100-80gb\"}}}" \
    "$code $(cat "$work/o.json")"
check "fixture: Content-Type" "application/json" \
    "$(c "${json[@]}" --data-binary @"$fx" -o /dev/null -w '%{content_type}' /mutate)"
sed 's#"admission.k8s.io/v1"#"admission.k8s.io/v1beta1"#' "$fx" >"$work/v1beta1.json"
post "$work/v1beta1.json" "$work/o.json" >/dev/null
want='{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64","allowed":true,'
check "v1beta1 review answered in v1beta1" "$want" "$(head -c ${#want} "$work/o.json")"
code=$(post "$data/mutate/review-service.json" "$work/o.json")
check "non-pod object: allowed untouched" \
    '200 {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"svc-1","allowed":true}}' \
    "$code $(cat "$work/o.json")"
"$gq" admit --review-only --uid cpu "$examples/cpu-only.yaml" >"$work/r.json"
code=$(post "$work/r.json" "$work/o.json")
check "CPU-only pod: allowed untouched" \
    '200 {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"cpu","allowed":true}}' \
    "$code $(cat "$work/o.json")"
# gpuquota's label and records written by the pod's author do not set the
# charge (the review records the author in managedFields as kube-apiserver
# does): 4 time-sliced A100 80GB with a forged gpu-requests of 1Gi each are
# charged 4 whole cards. (Reinvoked without a patch above, every backend.)
"$gq" admit --review-only --uid forged "$data/pods/forged-shared-bare.json" >"$work/r.json"
post "$work/r.json" "$work/o.json" >/dev/null
check "author's gpu-requests ignored: charged whole cards" \
    '"charged":"gpu-memory=320Gi,gpus=0,gpu-pods=1"' "$(grep -o '"charged":"[^"]*"' "$work/o.json")"

# A pod that asks for no GPU passes whatever its size (3600 containers,
# about 1.7 MB); the cap on containers applies to GPU pods only.
big_pod() { # big_pod N [LAST_LIMITS]: a pod with N heavy containers
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","namespace":"team-a"},'
    printf '"spec":{"containers":['
    local i env='"env":[{"name":"A","value":"1"},{"name":"B","value":"2"},{"name":"C","value":"3"},{"name":"D","value":"4"},{"name":"E","value":"5"},{"name":"F","value":"6"}]'
    for ((i = 0; i < $1; i++)); do
        ((i)) && printf ','
        printf '{"name":"c%d","image":"registry.example/app:1",%s,' "$i" "$env"
        printf '"volumeMounts":[{"name":"data","mountPath":"/data"},{"name":"cache","mountPath":"/cache"}],'
        printf '"ports":[{"containerPort":8080,"protocol":"TCP"}],"readinessProbe":{"httpGet":{"path":"/healthz","port":8080}},'
        printf '"resources":{"limits":{"cpu":"100m","memory":"64Mi"%s}}}' \
            "$([[ $((i + 1)) -eq $1 && -n ${2:-} ]] && printf ',%s' "$2")"
    done
    printf ']}}'
}
big_pod 3600 >"$work/big.json"
"$gq" admit --review-only --uid big "$work/big.json" >"$work/r.json"
code=$(post "$work/r.json" "$work/o.json")
check "CPU-only pod of $(wc -c <"$work/r.json") bytes, 3600 containers: allowed untouched" \
    '200 {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"big","allowed":true}}' \
    "$code $(cat "$work/o.json")"
big_pod 3600 '"nvidia.com/gpu":"1"' >"$work/big.json"
"$gq" admit --review-only --uid big-gpu "$work/big.json" >"$work/r.json"
code=$(post "$work/r.json" "$work/o.json")
# A GPU pod's decision copies the pod: with its copies this one would take
# more than half of --max-decoded-memory, so it is denied before the count
# of its containers is looked at (the CPU-only one above, never copied, is
# passed whatever its size).
check "the same pod asking for a GPU: denied, naming the cap" \
    '200 {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"big-gpu","allowed":false,"status":{"code":403,"reason":"Forbidden","message":"gpuquota cannot decide this Pod: the JSON decodes to more than 4194304 bytes of objects, too many to decide a GPU pod with its copies"}}}' \
    "$code $(cat "$work/o.json")"
big_pod 200 '"nvidia.com/gpu":"1"' >"$work/big.json"
"$gq" admit --review-only --uid big-gpu "$work/big.json" >"$work/r.json"
code=$(post "$work/r.json" "$work/o.json")
check "a GPU pod of 200 containers is decided (its copies fit)" \
    '200 {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"big-gpu","allowed":true' \
    "$(cut -c1-107 <<<"$code $(cat "$work/o.json")")"
sed 's/"operation":"CREATE"/"operation":"UPDATE"/' "$work/review.json" >"$work/update.json"
uid=$(sed -n 's/.*"request":{"uid":"\([^"]*\)".*/\1/p' "$work/update.json")
code=$(post "$work/update.json" "$work/o.json")
check "pod UPDATE: allowed untouched (resources are immutable)" \
    "200 {\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":\"$uid\",\"allowed\":true}}" \
    "$code $(cat "$work/o.json")"

# Abuse. Bodies over 3 MiB, announced or chunked, are refused before parsing.
head -c $((4 * 1024 * 1024)) /dev/zero | tr '\0' 'a' >"$work/4mib"
check "413 for a 4 MiB body (Content-Length)" \
    '{"code":413,"message":"request body exceeds 3145728 bytes"}|413' \
    "$(c "${json[@]}" --data-binary @"$work/4mib" -w '|%{http_code}' /mutate)"
check "413 for a 4 MiB chunked body" 413 \
    "$(status "${json[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$work/4mib" /mutate)"
check "415 for text/plain" \
    '{"code":415,"message":"content type text/plain not supported; use application/json"}|415' \
    "$(c -H 'Content-Type: text/plain' --data-binary @"$fx" -w '|%{http_code}' /mutate)"
check "415 without a content type" 415 \
    "$(status -H 'Content-Type:' --data-binary @"$fx" /mutate)"
check "405 for GET /mutate" 405 "$(status /mutate)"
printf '{"apiVersion":' >"$work/bad.json"
check "400 for malformed JSON" \
    '{"code":400,"message":"JSON text ends early (after 14 bytes)"}|400' \
    "$(c "${json[@]}" --data-binary @"$work/bad.json" -w '|%{http_code}' /mutate)"
{ printf '%.0s[' $(seq 100000); } >"$work/deep.json"
check "400 for deeply nested JSON" \
    '{"code":400,"message":"JSON nests deeper than 64 levels"}|400' \
    "$(c "${json[@]}" --data-binary @"$work/deep.json" -w '|%{http_code}' /mutate)"
tr -d '\n' <"$fx" | sed 's/"uid": *"b8f4c3a2[^"]*", *//' >"$work/nouid.json"
check "400 for a review without request.uid" \
    '{"code":400,"message":"request.uid is missing or empty"}|400' \
    "$(c "${json[@]}" --data-binary @"$work/nouid.json" -w '|%{http_code}' /mutate)"
check "healthz after bad bodies" 200 "$(status /healthz)"
check "bad bodies are counted as errors" \
    'gpuquota_admission_requests_total{webhook="mutate",operation="OTHER",decision="error"} 4' \
    "$(c /metrics | grep 'operation="OTHER",decision="error"')"

# A slow client (headers and part of a body, then silence) does not block
# others.
check_slow_client /mutate "reviews answered" post "$fx" /dev/null

# Plain HTTP to the TLS port fails; TLS 1.1 is refused by the server (the
# client may offer it: SECLEVEL=0).
if curl -sS --max-time 5 "${json[@]}" --data-binary @"$fx" "http://127.0.0.1:$port/mutate" \
    >/dev/null 2>&1; then
    fail "plain HTTP to the TLS port must fail"
else
    pass "plain HTTP to the TLS port fails"
fi
out=$(c --tlsv1.1 --tls-max 1.1 --ciphers 'DEFAULT:@SECLEVEL=0' "${json[@]}" --data-binary @"$fx" \
    /mutate 2>&1)
rc=$?
[[ $rc -ne 0 && "$out" != *"no protocols available"* ]] && pass "TLS 1.1 refused by the server" ||
    fail "TLS 1.1: rc=$rc $out"
check "TLS 1.2 works" 200 \
    "$(status --tlsv1.2 --tls-max 1.2 "${json[@]}" --data-binary @"$fx" /mutate)"

# Certificate swapped on disk while under load: four loops of fresh TLS
# connections (a handshake each) and wrk on keep-alive connections, while
# the serving pair is rotated five times. No request may fail.
before=$(served_serial)
loaders=()
for l in 1 2 3 4; do
    # At least 60 requests each, and on until every rotation is served.
    (n=0
     while [[ $n -lt 60 || ! -e "$work/rotated" ]]; do
         post "$fx" /dev/null
         echo
         n=$((n + 1))
     done >"$work/load-$l.codes") &
    loaders+=("$!")
    pids+=("$!")
done
GQ_BENCH_BODY=$fx wrk -t1 -c4 -d4s --timeout 10s -s "$lua" "https://127.0.0.1:$port/mutate" \
    >"$work/wrk.out" 2>&1 &
wrk_pid=$!
# Each rotation waits until the new pair is served, so all five are reloads.
serves_another() { [[ "$(served_serial)" != "$1" ]]; }
reloads=0
for _ in 1 2 3 4 5; do
    prev=$(served_serial)
    "$gq" certs generate --service $svc --namespace $ns --out "$work/certs" --san localhost \
        --san 127.0.0.1 --rotate >/dev/null
    wait_until 10 serves_another "$prev" && reloads=$((reloads + 1))
done
touch "$work/rotated"
check "swap under load: five rotations, each served" 5 "$reloads"
wait "$wrk_pid" "${loaders[@]}"
total=$(cat "$work"/load-*.codes | wc -l)
good=$(grep -c '^200$' "$work"/load-*.codes | awk -F: '{s += $2} END {print s}')
check "swap under load: every fresh-connection request answered 200" "$total" "$good"
[[ $total -ge 200 ]] && pass "  ...$total requests" || fail "  ...only $total requests"
check "swap under load: wrk saw no error" "errors=0" "$(grep -o 'errors=[0-9]*' "$work/wrk.out")"
[[ "$(served_serial)" != "$before" ]] && pass "  ...and the new certificate is served" ||
    fail "  ...the certificate was not reloaded"

# Audit: SIGHUP reopens the file (logrotate's create mode).
mv "$audit" "$audit.1"
kill -HUP "$pid"
wait_until 5 grep -q 'received SIGHUP' "$log" || fail "SIGHUP not received"
post "$fx" /dev/null >/dev/null
check "SIGHUP: a fresh audit file gets the next record" 1 "$(lines_soon "$audit" 1)"
check_grep "audit record fields" "$audit" \
    '^\{"time":"[0-9-]{10}T[0-9:.]{15}Z","uid":"b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64","webhook":"mutate","operation":"CREATE","namespace":"ml-research","name":"llm-finetune-0-","user":"system:serviceaccount:kube-system:job-controller","dryRun":false,"decision":"allowed","request":\{"trainer":\{"nvidia.com/gpu":"8"\}\},"rewrite":\{"schedulerName":"gpushare-scheduler","operations":5\},"charge":\{"gpu-memory":"640Gi","gpu-pods":"1","gpus":"8"\},"latencyMs":[0-9]+\.[0-9]{3}\}$'
check "audit write errors: none so far" "gpuquota_audit_write_errors_total 0" \
    "$(c /metrics | grep '^gpuquota_audit_write_errors_total')"

# Draining on SIGTERM: a review whose body is still arriving is answered.
(printf 'POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n' \
    "$(wc -c <"$fx")"
 head -c 100 "$fx"; sleep 3; tail -c +101 "$fx"; sleep 2) |
    openssl s_client -quiet -connect "127.0.0.1:$port" >"$work/drain.out" 2>/dev/null &
inflight=$!
# The TLS handshake and the headers are in, and part of the body: the server
# has reserved room for it.
body_in_flight() { c /metrics | grep -Eq '^gpuquota_http_body_bytes_in_flight [1-9]'; }
wait_until 5 body_in_flight || fail "the slow review never reached the server"
kill -TERM "$pid"
refused() {
    ! curl -sS --max-time 1 --cacert "$work/certs/ca.crt" --resolve "$host:$port:127.0.0.1" \
        "https://$host:$port/healthz" >/dev/null 2>&1
}
if wait_until 2 refused && kill -0 "$inflight" 2>/dev/null; then
    pass "new connections refused while draining"
else
    fail "new connections refused while draining"
fi
wait "$inflight"
check "in-flight review answered during drain" "HTTP/1.1 200 OK" "$(head -1 "$work/drain.out" | tr -d '\r')"
grep -q '"uid":"b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64","allowed":true' "$work/drain.out" &&
    pass "  ...with its decision" || fail "  ...no decision in $(cat "$work/drain.out")"
wait "$pid"
check "SIGTERM: exits 0 after draining" 0 $?

# Audit write errors are counted, logged once, and never fail the admission.
printf 'audit:\n  path: /dev/full\n' >"$work/full.yaml"
start_webhook "$work/full.yaml" "$work/webhook-full.log"
check "audit unwritable: the review is still answered" 200 "$(post "$fx" /dev/null)"
post "$fx" /dev/null >/dev/null
audit_errors() { c /metrics | grep '^gpuquota_audit_write_errors_total'; }
# The writer thread counts the failures after the answers.
wait_until 5 eval '[[ "$(audit_errors)" == "gpuquota_audit_write_errors_total 2" ]]'
check "audit unwritable: errors in /metrics" "gpuquota_audit_write_errors_total 2" "$(audit_errors)"
check "audit unwritable: logged once per burst" 1 \
    "$(grep -c 'audit log /dev/full: write: No space left on device' "$work/webhook-full.log")"
stop_server "$pid"

finish
