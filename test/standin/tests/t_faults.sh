#!/usr/bin/env bash
# The fault-injection control endpoint and the counters.
. "$(dirname "$0")/lib.sh"
standin_start

CMS=/api/v1/namespaces/default/configmaps
fault() { curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary "$1" "$S/standin/faults"; }

# fail: the next N matching requests
expect_eq "set fail" 200 "$(fault '{"fail":{"count":2,"code":503,"method":"GET","pathPrefix":"/api/v1/namespaces/default/configmaps"}}')"
req POST $CMS '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}'
expect_eq "other method passes" 201 "$CODE"
req GET /api/v1/namespaces
expect_eq "other path passes" 200 "$CODE"
req GET $CMS/a
expect_eq "injected 503" '503 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected fault (HTTP 503)","reason":"ServiceUnavailable","code":503}' "$CODE $BODY"
req GET $CMS
expect_eq "second injected" 503 "$CODE"
req GET $CMS/a
expect_eq "then normal again" 200 "$CODE"
fault '{"fail":{"count":1,"code":429}}' >/dev/null
req GET /version
expect_eq "429 any request" '429 "TooManyRequests"' "$CODE $(jqb .reason)"
fault '{"fail":{"count":1,"code":500}}' >/dev/null
req GET /version
expect_eq "500" '500 "InternalError"' "$CODE $(jqb .reason)"

# latency
fault '{"latencyMs":1000}' >/dev/null
T=$(curl -s -o /dev/null -w '%{time_total}' "$S/version")
expect_eq "latency applied" 1 "$(awk -v t="$T" 'BEGIN { print (t >= 0.99) }')"
fault '{"latencyMs":0}' >/dev/null
T=$(curl -s -o /dev/null -w '%{time_total}' "$S/version")
expect_eq "latency cleared" 1 "$(awk -v t="$T" 'BEGIN { print (t < 0.8) }')"

# conflictStatus: status writes only
CRD=$(cat <<'J'
{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},
 "spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"widgets","kind":"Widget"},
 "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}
J
)
req POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$CRD"
W=/apis/example.com/v1/namespaces/default/widgets
req POST $W '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"n":1}}'
fault '{"conflictStatus":2}' >/dev/null
req PATCH $W/w '{"spec":{"n":2}}' application/merge-patch+json
expect_eq "main resource not affected" 200 "$CODE"
req PATCH $W/w/status '{"status":{"ok":true}}' application/merge-patch+json
expect_eq "status conflict injected" '409 "Conflict" "Operation cannot be fulfilled on widgets.example.com \"w\": the object has been modified; please apply your changes to the latest version and try again"' "$CODE $(jqb .reason) $(jqb .message)"
req PATCH $W/w/status '{"status":{"ok":true}}' application/merge-patch+json
expect_eq "second status conflict" 409 "$CODE"
req PATCH $W/w/status '{"status":{"ok":true}}' application/merge-patch+json
expect_eq "then status write works" '200 true' "$CODE $(jqb .status.ok)"

# watchGone
fault '{"watchGone":1}' >/dev/null
req GET "$CMS?watch=true&resourceVersion=1"
expect_eq "watchGone" '200 "ERROR" 410 "Expired"' "$CODE $(jqb .type) $(jqb .object.code) $(jqb .object.reason)"
req GET "$CMS?watch=true&timeoutSeconds=1"
expect_eq "watchGone used up" '"ADDED"' "$(jqb .type)"

# cutWatchAfter: current and new watches close after K more events
curl -s -N "$S$CMS?watch=true&timeoutSeconds=10" >"$TMP/w1" &
W1=$!
sleep 0.3
fault '{"cutWatchAfter":2}' >/dev/null
curl -s -N "$S$CMS?watch=true&resourceVersion=$(curl -s "$S$CMS" | jq -r .metadata.resourceVersion)&timeoutSeconds=10" >"$TMP/w2" &
W2=$!
sleep 0.3
START=$(date +%s)
for n in b c d; do req POST $CMS "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"$n\"}}"; done
wait $W1 $W2
expect_eq "existing watch cut" '["a","b","c"]' "$(jq -sc '[.[].object.metadata.name]' "$TMP/w1")"
expect_eq "new watch cut" '["b","c"]' "$(jq -sc '[.[].object.metadata.name]' "$TMP/w2")"
expect_eq "cut promptly" 1 "$(( $(date +%s) - START < 5 ))"

# reset clears everything
fault '{"latencyMs":1000,"conflictStatus":5,"watchGone":3,"fail":{"count":9,"code":500,"pathPrefix":"/apis"}}' >/dev/null
expect_eq "reset" 200 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$S/standin/reset")"
T=$(curl -s -o /dev/null -w '%{time_total}' "$S/version")
expect_eq "reset latency" 1 "$(awk -v t="$T" 'BEGIN { print (t < 0.8) }')"
req PATCH $W/w/status '{"status":{"ok":false}}' application/merge-patch+json
expect_eq "reset conflicts" 200 "$CODE"
req GET "$CMS?watch=true&timeoutSeconds=1"
expect_eq "reset watchGone and cut" '["a","b","c","d"]' "$(printf '%s\n' "$BODY" | jq -sc '[.[].object.metadata.name]')"
req GET /apis
expect_eq "reset fail" 200 "$CODE"

# bad control requests
expect_eq "bad fault body" 400 "$(fault '{"fail":{"count":-1,"code":500}}')"
expect_eq "unknown fault" 400 "$(fault '{"explode":true}')"
expect_eq "not json" 400 "$(fault 'nope')"

# stats
STATS=$(curl -s "$S/standin/stats")
expect_eq "stats shape" '["conflictsInjected","faultsInjected","requests","resourceVersion","statusWrites","watchesOpen"]' "$(printf '%s' "$STATS" | jq -c 'keys')"
expect_eq "stats counters" '{"conflictsInjected":2,"statusWrites":2,"watchesOpen":0,"faultsInjected":5}' "$(printf '%s' "$STATS" | jq -c '{conflictsInjected,statusWrites,watchesOpen,faultsInjected}')"
expect_eq "stats verbs" '{"create":6,"watch":5,"patch":5}' "$(printf '%s' "$STATS" | jq -c '{create:.requests.create,watch:.requests.watch,patch:.requests.patch}')"

# Losing state: restore goes back to a snapshot (etcd restored from a
# backup): objects, the resourceVersion counter and an empty history; open
# watches end; a watch from a resourceVersion the server has not reached gets
# kube-apiserver's 504 "Too large resource version" ERROR event.
req POST /standin/restore
expect_eq "restore without a snapshot" '400 "no snapshot taken (POST /standin/snapshot)"' "$CODE $(jqb .message)"
req POST /standin/snapshot
SNAP_RV=$(jqr .resourceVersion)
expect_eq "snapshot" 200 "$CODE"
req POST $CMS '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after-snapshot"}}'
req POST $CMS '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after-snapshot-2"}}'
SEEN_RV=$(jqr .metadata.resourceVersion)
curl -s -N "$S$CMS?watch=true&resourceVersion=$SEEN_RV&timeoutSeconds=30" >"$TMP/wr" &
WR=$!
sleep 0.3
START=$(date +%s)
req POST /standin/restore
expect_eq "restore: the revision goes back" "200 $SNAP_RV" "$CODE $(jqr .resourceVersion)"
wait $WR
expect_eq "restore ends open watches" 1 "$(( $(date +%s) - START < 5 ))"
req GET $CMS/after-snapshot
expect_eq "objects written after the snapshot are gone" 404 "$CODE"
req GET $CMS/a
expect_eq "objects of the snapshot are back" 200 "$CODE"
req GET $CMS
expect_eq "lists report the restored revision" "$SNAP_RV" "$(jqr .metadata.resourceVersion)"
req GET "$CMS?watch=true&resourceVersion=$SEEN_RV"
expect_eq "watch from a revision not reached: 504 Too large resource version" \
    "200 {\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: Too large resource version: $SEEN_RV, current: $SNAP_RV\",\"reason\":\"Timeout\",\"code\":504,\"details\":{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":\"Too large resource version\"}],\"retryAfterSeconds\":1}}}" \
    "$CODE $BODY"
req POST $CMS '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after-restore"}}'
expect_eq "writes continue from the restored revision" "$((SNAP_RV + 1))" "$(jqr .metadata.resourceVersion)"

finish
