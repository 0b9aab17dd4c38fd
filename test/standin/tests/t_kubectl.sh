#!/usr/bin/env bash
# Real kubectl against the stand-in: CRDs and custom resources (apply, get,
# printer columns, patch, status subresource, delete), pods and namespaces,
# selectors, paging, watch.
. "$(dirname "$0")/lib.sh"
standin_start
K() { timeout 30 kubectl "$@" 2>&1; }
# kubectl delete as kubectl before 1.34 words it: 1.34 adds "from NS
# namespace" to a namespaced object's line.
KD() { K delete "$@" | sed -E 's/ deleted from [a-z0-9-]+ namespace$/ deleted/'; }
GQ=/apis/gpuquota.io/v1alpha1/namespaces/default/gpuquotas

expect_eq "apply CRD (validation on)" 'customresourcedefinition.apiextensions.k8s.io/gpuquotas.gpuquota.io created' "$(K apply -f "$DATA/crd.yaml")"
expect_eq "CRD established" 'customresourcedefinition.apiextensions.k8s.io/gpuquotas.gpuquota.io condition met' "$(K wait --for condition=established crd/gpuquotas.gpuquota.io --timeout=10s)"
expect_eq "apply CR" 'gpuquota.gpuquota.io/team-a created' "$(K apply -f "$DATA/gq.yaml")"
expect_eq "get -o json" '{"apiVersion":"gpuquota.io/v1alpha1","kind":"GPUQuota","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{\"annotations\":{},\"labels\":{\"team\":\"a\"},\"name\":\"team-a\",\"namespace\":\"default\"},\"spec\":{\"hard\":{\"gpu-memory\":\"80Gi\"}}}\n"},"generation":1,"labels":{"team":"a"},"name":"team-a","namespace":"default"},"spec":{"hard":{"gpu-memory":"80Gi"}}}' \
    "$(K get gq team-a -o json | jq -c 'del(.metadata.uid,.metadata.creationTimestamp,.metadata.resourceVersion)')"
expect_eq "short name and full name agree" "$(K get gpuquotas.gpuquota.io team-a -o name)" "$(K get gq team-a -o name)"

# status subresource: main writes keep status; /status writes change only status
req PATCH $GQ/team-a '{"status":{"used":{"gpu-memory":"1Gi"}}}' application/merge-patch+json
expect_eq "status ignored on main resource" '200 null 1' "$CODE $(jqb .status) $(jqb .metadata.generation)"
req GET $GQ/team-a
RV=$(jqr .metadata.resourceVersion)
req PUT $GQ/team-a/status "$(printf '%s' "$BODY" | jq -c '.status={"used":{"gpu-memory":"10Gi"},"pods":3} | .spec.hard["gpu-memory"]="1Ti"')"
expect_eq "status write" '200 {"used":{"gpu-memory":"10Gi"},"pods":3} "80Gi" 1' "$CODE $(jqb .status) $(jqb '.spec.hard["gpu-memory"]') $(jqb .metadata.generation)"
req PUT $GQ/team-a/status "$(printf '%s' "$BODY" | jq -c --arg rv "$RV" '.metadata.resourceVersion=$rv')"
expect_eq "stale status write" '409 "Conflict"' "$CODE $(jqb .reason)"
req GET $GQ/team-a
req PUT $GQ/team-a "$(printf '%s' "$BODY" | jq -c 'del(.metadata.resourceVersion)')"
expect_eq "CR update needs resourceVersion" '422 "gpuquotas.gpuquota.io \"team-a\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"' "$CODE $(jqb .message)"
# a CR list shows each item's TypeMeta and its state after the last write
req GET $GQ
expect_eq "CR list item" '"GPUQuota" "gpuquota.io/v1alpha1" {"used":{"gpu-memory":"10Gi"},"pods":3}' "$(jqb .items[0].kind) $(jqb .items[0].apiVersion) $(jqb .items[0].status)"
req GET $GQ/team-a
req PUT $GQ/team-a/status "$(printf '%s' "$BODY" | jq -c '.status.pods=4')"
req GET $GQ
expect_eq "CR list after a write" '4 "GPUQuota"' "$(jqb .items[0].status.pods) $(jqb .items[0].kind)"
req GET $GQ/team-a
req PUT $GQ/team-a/status "$(printf '%s' "$BODY" | jq -c '.status.pods=3')"
req POST /apis/gpuquota.io/v1alpha1/namespaces/default/gpuquotas '{"apiVersion":"gpuquota.io/v1alpha1","kind":"Other","metadata":{"name":"k"}}'
expect_eq "CR kind mismatch" '422 "Other.gpuquota.io \"k\" is invalid: kind: Invalid value: \"Other\": must be GPUQuota"' "$CODE $(jqb .message)"

# printer columns (JSONPath with ['x-y'] and .x-y), Name first
OUT=$(K get gq)
expect_match "printer columns" $'^NAME +HARD +USED +PODS +AGE\nteam-a +80Gi +10Gi +3 +[0-9]+s$' "$OUT"
TABLE=$(curl -s -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' "$S$GQ")
expect_eq "Table columns" '[["Name","string"],["Hard","string"],["Used","string"],["Pods","integer"],["Age","date"]]' "$(printf '%s' "$TABLE" | jq -c '[.columnDefinitions[]|[.name,.type]]')"
expect_eq "Table row" '["team-a","80Gi","10Gi",3] "PartialObjectMetadata"' "$(printf '%s' "$TABLE" | jq -c '.rows[0].cells[0:4]') $(printf '%s' "$TABLE" | jq -c .rows[0].object.kind)"

expect_eq "patch --type merge" 'gpuquota.gpuquota.io/team-a patched' "$(K patch gq team-a --type merge -p '{"spec":{"hard":{"gpu-memory":"100Gi"}}}')"
expect_eq "generation bumped, status kept" '2 {"pods":3,"used":{"gpu-memory":"10Gi"}}' "$(K get gq team-a -o jsonpath='{.metadata.generation} {.status}')"
expect_eq "patch --type json" 'gpuquota.gpuquota.io/team-a patched' "$(K patch gq team-a --type json -p '[{"op":"replace","path":"/spec/hard/gpu-memory","value":"90Gi"}]')"
expect_eq "kubectl patch --subresource status" 'gpuquota.gpuquota.io/team-a patched' "$(K patch gq team-a --subresource status --type merge -p '{"status":{"pods":4}}')"
expect_eq "re-apply restores spec" 'gpuquota.gpuquota.io/team-a configured' "$(K apply -f "$DATA/gq.yaml")"
expect_eq "after re-apply" '80Gi 4 4' "$(K get gq team-a -o jsonpath='{.spec.hard.gpu-memory} {.status.pods} {.metadata.generation}')"
expect_eq "kubectl delete CR" 'gpuquota.gpuquota.io "team-a" deleted' "$(KD gq team-a)"
expect_eq "gone" 'Error from server (NotFound): gpuquotas.gpuquota.io "team-a" not found' "$(K get gq team-a)"

# pods
expect_eq "apply pod" 'pod/web-1 created' "$(K apply -f "$DATA/pods.yaml")"
for i in 2 3 4 5; do K run web-$i --image=busybox --labels=app=y >/dev/null; done
expect_match "get pods" $'^NAME +READY +STATUS +RESTARTS +AGE\nweb-1 +0/1 +Pending +0 +[0-9]+s\nweb-2 ' "$(K get pods)"
expect_eq "get pods -l app=x" 'web-1' "$(K get pods -l app=x -o name | sed 's#pod/##')"
expect_eq "get pods -l 'app in (y)'" 'web-2 web-3 web-4 web-5' "$(K get pods -l 'app in (y),app!=z' -o name | sed 's#pod/##' | tr '\n' ' ' | sed 's/ $//')"
K patch pod web-2 --subresource status --type merge -p '{"status":{"phase":"Running"}}' >/dev/null
expect_eq "--field-selector status.phase=Running" 'pod/web-2' "$(K get pods --field-selector status.phase=Running -o name)"
expect_eq "--field-selector metadata.name!=web-1" '4' "$(K get pods --field-selector metadata.name!=web-1 -o name | wc -l)"
OUT=$(timeout 30 kubectl get pods --chunk-size=2 -v=6 2>&1)
# one page per request; kubectl 1.34 logs them as verb="GET" url=... status="200 OK"
expect_eq "chunked list requests" '3' "$(printf '%s\n' "$OUT" | grep -c 'GET.*/pods?.*limit=2.*[ "]200 OK')"
expect_eq "chunked list rows" '5' "$(printf '%s\n' "$OUT" | grep -c '^web-')"
sed 's/app: x/app: x\n    tier: silver/' "$DATA/pods.yaml" >"$TMP/pods2.yaml"
expect_eq "re-apply pod (strategic merge from kubectl)" 'pod/web-1 configured' "$(K apply -f "$TMP/pods2.yaml")"
expect_eq "re-applied label" 'silver busybox' "$(K get pod web-1 -o jsonpath='{.metadata.labels.tier} {.spec.containers[0].image}')"
expect_eq "pod strategic patch" 'pod/web-1 patched' "$(K patch pod web-1 -p '{"metadata":{"labels":{"tier":"gold"}}}')"
expect_eq "label applied" 'gold' "$(K get pod web-1 -o jsonpath='{.metadata.labels.tier}')"
expect_eq "kubectl label" 'pod/web-1 labeled' "$(K label pod web-1 extra=1)"
expect_eq "delete pod" 'pod "web-3" deleted' "$(KD pod web-3)"
expect_eq "delete by label" $'pod "web-4" deleted\npod "web-5" deleted' "$(KD pods -l app=y --field-selector metadata.name!=web-2)"
expect_eq "remaining" 'web-1 web-2' "$(K get pods -o name | sed 's#pod/##' | tr '\n' ' ' | sed 's/ $//')"

# namespaces
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n' >"$TMP/ns.yaml"
expect_eq "create namespace" 'namespace/team-b created' "$(K create -f "$TMP/ns.yaml")"
expect_match "get ns" $'^NAME +STATUS +AGE\ndefault +Active +[0-9]+s\nkube-system +Active +[0-9]+s\nteam-b +Active +[0-9]+s$' "$(K get ns)"
expect_eq "pod in new namespace" 'pod/x created' "$(K run x --image=i -n team-b)"
expect_eq "get pods -A" 'default/web-1 default/web-2 team-b/x' "$(K get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {end}' | sed 's/ $//')"
expect_eq "delete namespace" 'namespace "team-b" deleted' "$(K delete ns team-b)"
expect_eq "namespace content gone" 'No resources found in team-b namespace.' "$(K get pods -n team-b)"

# typed commands send protobuf bodies
expect_eq "create ns (protobuf)" 'namespace/team-c created' "$(K create ns team-c)"
expect_eq "namespace defaults" '{"labels":{"kubernetes.io/metadata.name":"team-c"},"spec":{"finalizers":["kubernetes"]},"phase":"Active"}' "$(K get ns team-c -o json | jq -c '{labels:.metadata.labels,spec,phase:.status.phase}')"
expect_eq "create configmap (protobuf)" 'configmap/cm1 created' "$(K create configmap cm1 -n team-c --from-literal=a=b --from-literal=c=d)"
expect_eq "configmap data" '{"a":"b","c":"d"}' "$(K get cm cm1 -n team-c -o json | jq -c .data)"
expect_eq "create secret (protobuf)" 'secret/s1 created' "$(K create secret generic s1 -n team-c --from-literal=pw=hunter2)"
expect_eq "secret data" 'aHVudGVyMg== Opaque' "$(K get secret s1 -n team-c -o jsonpath='{.data.pw} {.type}')"
expect_eq "create ns dry run" 'namespace/dry created (server dry run)' "$(K create ns dry --dry-run=server)"
expect_eq "dry run stored nothing" 'Error from server (NotFound): namespaces "dry" not found' "$(K get ns dry)"

# kubectl get -w sees a change
timeout 5 kubectl get pods -w --output-watch-events >"$TMP/w" 2>&1 &
WP=$!
sleep 1.5
K label pod web-2 watched=yes >/dev/null
sleep 1
kill $WP 2>/dev/null; wait $WP 2>/dev/null
expect_match "get -w" 'MODIFIED +web-2' "$(cat "$TMP/w")"

expect_eq "delete CRD" 'customresourcedefinition.apiextensions.k8s.io "gpuquotas.gpuquota.io" deleted' "$(K delete -f "$DATA/crd.yaml")"
req GET $GQ
expect_eq "CR type gone" '404 "NotFound"' "$CODE $(jqb .reason)"
req GET /apis/gpuquota.io
expect_eq "CR group gone" 404 "$CODE"

finish
