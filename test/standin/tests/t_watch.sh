#!/usr/bin/env bash
# Watch semantics: ordered events, selectors, 410 for a too-old
# resourceVersion, synthetic ADDED for rv 0, bookmarks, timeouts.
. "$(dirname "$0")/lib.sh"
standin_start --history 5

CMS=/api/v1/namespaces/default/configmaps
cm() { printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","labels":{"app":"%s"}}}' "$1" "$2"; }

# watch PATH OUTFILE: background curl; WPID is its pid. The watches end by
# their timeoutSeconds, which leave the requests sent after them 2-4 s to
# arrive: a loaded machine can take a second to start a curl.
watch_bg() {
    curl -s -N -H "Authorization: Bearer test-token" "$S$1" >"$2" &
    WPID=$!
    sleep 0.3
}
events() { jq -c '[.type, .object.metadata.name // .object.reason // null]' "$1" | tr '\n' ' '; }

req POST $CMS "$(cm one a)"
RV0=$(jqr .metadata.resourceVersion)

# Live events in order, from the resourceVersion a list returned.
watch_bg "$CMS?watch=true&resourceVersion=$RV0&timeoutSeconds=4" "$TMP/w1"
req POST $CMS "$(cm two a)"
req PATCH $CMS/one '{"data":{"k":"v"}}' application/merge-patch+json
req DELETE $CMS/two
wait $WPID
expect_eq "events in order" '["ADDED","two"] ["MODIFIED","one"] ["DELETED","two"] ' "$(events "$TMP/w1")"
expect_eq "event rvs increase" 'true' "$(jq -s '[.[].object.metadata.resourceVersion|tonumber] | . == (sort) and length == 3' "$TMP/w1")"
expect_eq "event object has TypeMeta" '"ConfigMap" "v1"' "$(head -1 "$TMP/w1" | jq -c .object.kind) $(head -1 "$TMP/w1" | jq -c .object.apiVersion)"

# rv 0 / absent: synthetic ADDED for what exists, then live events.
watch_bg "$CMS?watch=1&timeoutSeconds=3" "$TMP/w2"
req POST $CMS "$(cm three b)"
wait $WPID
expect_eq "synthetic ADDED then live" '["ADDED","one"] ["ADDED","three"] ' "$(events "$TMP/w2")"

# Label selector; an object leaving the selection is seen as DELETED.
req GET $CMS
RV=$(jqr .metadata.resourceVersion)
watch_bg "$CMS?watch=true&resourceVersion=$RV&labelSelector=app%3Db&timeoutSeconds=4" "$TMP/w3"
req POST $CMS "$(cm four a)"
req PATCH $CMS/one '{"metadata":{"labels":{"app":"b"}}}' application/merge-patch+json
req PATCH $CMS/three '{"metadata":{"labels":{"app":"c"}}}' application/merge-patch+json
wait $WPID
expect_eq "selector transitions" '["ADDED","one"] ["DELETED","three"] ' "$(events "$TMP/w3")"

# Field selector on a watch.
req GET $CMS
RV=$(jqr .metadata.resourceVersion)
watch_bg "$CMS?watch=true&resourceVersion=$RV&fieldSelector=metadata.name%3Dfour&timeoutSeconds=4" "$TMP/w4"
req PATCH $CMS/one '{"data":{"x":"1"}}' application/merge-patch+json
req PATCH $CMS/four '{"data":{"x":"1"}}' application/merge-patch+json
wait $WPID
expect_eq "field selector watch" '["MODIFIED","four"] ' "$(events "$TMP/w4")"

# History is 5 events: the first resourceVersion is long gone.
req GET "$CMS?watch=true&resourceVersion=$RV0"
expect_eq "too old resourceVersion" '200 {"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: '"$RV0"' ('"$(( $(curl -s "$S/standin/stats" | jq -r .resourceVersion) - 4 ))"')","reason":"Expired","code":410}}' "$CODE $BODY"

# Bookmarks: only metadata.resourceVersion, current revision.
req GET $CMS
RV=$(jqr .metadata.resourceVersion)
watch_bg "$CMS?watch=true&resourceVersion=$RV&allowWatchBookmarks=true&timeoutSeconds=3" "$TMP/w5"
wait $WPID
expect_match "bookmarks" '^\["BOOKMARK",null\] \["BOOKMARK",null\] ' "$(events "$TMP/w5")"
expect_eq "bookmark object" "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"$RV\"}}" "$(head -1 "$TMP/w5" | jq -c .object)"

# Namespaced watch ignores other namespaces; all-namespace watch sees them.
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}'
RV=$(jqr .metadata.resourceVersion)
watch_bg "$CMS?watch=true&resourceVersion=$RV&timeoutSeconds=3" "$TMP/w6"
W6=$WPID
watch_bg "/api/v1/configmaps?watch=true&resourceVersion=$RV&timeoutSeconds=3" "$TMP/w7"
req POST /api/v1/namespaces/other/configmaps "$(cm five a)"
wait $W6 $WPID
expect_eq "namespaced watch" '' "$(events "$TMP/w6")"
expect_eq "all-namespace watch" '["ADDED","five"] ' "$(events "$TMP/w7")"

# Many concurrent watchers all see the event.
req GET $CMS
RV=$(jqr .metadata.resourceVersion)
PIDS=()
for i in $(seq 40); do
    curl -s -N "$S$CMS?watch=true&resourceVersion=$RV&timeoutSeconds=2" >"$TMP/m$i" &
    PIDS+=($!)
done
expect_eq "watches open" 40 "$(stat_eventually watchesOpen 40)"
req POST $CMS "$(cm six a)"
wait "${PIDS[@]}"
OK=0
for i in $(seq 40); do [ "$(events "$TMP/m$i")" == '["ADDED","six"] ' ] && OK=$((OK + 1)); done
expect_eq "40 watchers got the event" 40 "$OK"
expect_eq "watches closed" 0 "$(stat_eventually watchesOpen 0)"

# A client that hangs up is noticed.
curl -s -N "$S$CMS?watch=true" >/dev/null &
CP=$!
stat_eventually watchesOpen 1 >/dev/null
kill $CP; wait $CP 2>/dev/null
expect_eq "hung-up watch closed" 0 "$(stat_eventually watchesOpen 0)"

# A continue token older than the history is 410 Expired, like a compacted etcd revision.
req GET "$CMS?limit=1"
C=$(jqr .metadata.continue)
for i in 1 2 3 4 5 6; do req PATCH $CMS/one "{\"data\":{\"n\":\"$i\"}}" application/merge-patch+json; done
req GET "$CMS?limit=1&continue=$C"
expect_eq "expired continue" '410 "Expired"' "$CODE $(jqb .reason)"

req GET "$CMS?watch=true&resourceVersion=abc"
expect_eq "bad resourceVersion" '400 "BadRequest"' "$CODE $(jqb .reason)"

# With the default history, concurrent writers cannot outrun the watchers
# (with --history 5 a lagging watcher rightly gets 410).
standin_stop
standin_start
# Concurrent writers: every watcher sees every event once, in resourceVersion order.
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"busy"}}'
RV=$(jqr .metadata.resourceVersion)
PIDS=()
for i in $(seq 5); do
    curl -s -N "$S/api/v1/namespaces/busy/configmaps?watch=true&resourceVersion=$RV&timeoutSeconds=60" >"$TMP/c$i" &
    PIDS+=($!)
done
WRITERS=()
for w in $(seq 8); do
    (for j in $(seq 15); do
        curl -s -o /dev/null -X POST -H 'Content-Type: application/json' \
            --data-binary "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"w$w-$j\"}}" \
            "$S/api/v1/namespaces/busy/configmaps"
    done) &
    WRITERS+=($!)
done
wait "${WRITERS[@]}"
for _ in $(seq 100); do
    [ "$(cat "$TMP"/c[1-5] | wc -l)" -ge 600 ] && break
    sleep 0.1
done
kill "${PIDS[@]}" 2>/dev/null
wait "${PIDS[@]}" 2>/dev/null
OK=0
for i in $(seq 5); do
    [ "$(jq -s '[.[].object.metadata.resourceVersion|tonumber] as $r | ($r|length) == 120 and $r == ($r|sort) and ($r|unique|length) == 120' "$TMP/c$i")" == true ] && OK=$((OK + 1))
done
expect_eq "5 watchers saw 120 concurrent creates in order" 5 "$OK"
req GET /api/v1/namespaces/busy/configmaps
expect_eq "all 120 stored" 120 "$(jqb '.items|length')"

finish
