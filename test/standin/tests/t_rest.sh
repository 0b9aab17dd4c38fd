#!/usr/bin/env bash
# curl-level checks of kube-apiserver semantics: Status shapes and codes,
# resourceVersion, generation, status subresource, finalizers, dry run.
. "$(dirname "$0")/lib.sh"
standin_start

POD='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}'
PODS=/api/v1/namespaces/default/pods

# --- create, get, 404s
req POST $PODS "$POD"
expect_eq "create code" 201 "$CODE"
expect_eq "create shape" '{"apiVersion":"v1","kind":"Pod","name":"p1","namespace":"default","phase":"Pending","gen":null}' \
    "$(jqb '{apiVersion,kind,name:.metadata.name,namespace:.metadata.namespace,phase:.status.phase,gen:.metadata.generation}')"
expect_match "uid" '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' "$(jqr .metadata.uid)"
expect_match "creationTimestamp" '^"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"$' "$(jqb .metadata.creationTimestamp)"
RV1=$(jqr .metadata.resourceVersion)

req POST $PODS "$POD"
expect_eq "already exists" '409 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p1\" already exists","reason":"AlreadyExists","details":{"name":"p1","kind":"pods"},"code":409}' "$CODE $BODY"

req GET $PODS/nope
expect_eq "not found" '404 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"pods"},"code":404}' "$CODE $BODY"

req POST /api/v1/namespaces/ghost/pods "$POD"
expect_eq "missing namespace" '404 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"namespaces \"ghost\" not found","reason":"NotFound","details":{"name":"ghost","kind":"namespaces"},"code":404}' "$CODE $BODY"

req GET /api/v1/namespaces/ghost/pods/p1
expect_eq "pod in missing namespace" 404 "$CODE"

req GET /api/v1/widgets
expect_eq "unknown resource" '404 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}' "$CODE $BODY"

req POST /api/v1/pods "$POD"
expect_eq "create without namespace" 405 "$CODE"
expect_eq "405 reason" '"MethodNotAllowed"' "$(jqb .reason)"

# --- 422 and 400
req POST $PODS '{"apiVersion":"v1","kind":"Pod","metadata":{},"spec":{"containers":[{"name":"c","image":"i"}]}}'
expect_eq "missing name" '422 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Pod \"\" is invalid: metadata.name: Required value: name or generateName is required","reason":"Invalid","details":{"name":"","kind":"Pod","causes":[{"reason":"FieldValueRequired","message":"Required value: name or generateName is required","field":"metadata.name"}]},"code":422}' "$CODE $BODY"

req POST $PODS '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"i"}]}}'
expect_eq "bad name code" 422 "$CODE"
expect_eq "bad name message" '"Pod \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '"'"'-'"'"' or '"'"'.'"'"', and must start and end with an alphanumeric character (e.g. '"'"'example.com'"'"', regex used for validation is '"'"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'"'"')"' "$(jqb .message)"
expect_eq "bad name cause" '[{"reason":"FieldValueInvalid","field":"metadata.name"}]' "$(jqb '[.details.causes[]|{reason,field}]')"

req POST $PODS '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"noimg"},"spec":{"containers":[{"name":"c"},{"image":"i"}]}}'
expect_eq "pod validation" '422 "Pod \"noimg\" is invalid: [spec.containers[0].image: Required value, spec.containers[1].name: Required value]"' "$CODE $(jqb .message)"

req POST $PODS '{"apiVersion":"v2","kind":"Pod","metadata":{"name":"v2"}}'
expect_eq "apiVersion mismatch" '400 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the API version in the data (v2) does not match the expected API version (v1)","reason":"BadRequest","code":400}' "$CODE $BODY"

req POST $PODS '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"k"}}'
expect_eq "kind mismatch (built-in)" '400 "BadRequest"' "$CODE $(jqb .reason)"

req POST $PODS '{"apiVersion":"v1",'
expect_eq "malformed json" '400 "BadRequest"' "$CODE $(jqb .reason)"

req POST $PODS "$(printf '%.0s[' $(seq 200))"
expect_eq "deeply nested json" 400 "$CODE"

head -c 3200000 /dev/zero | tr '\0' ' ' >"$TMP/big"
CODE=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @"$TMP/big" "$S$PODS")
expect_eq "oversized body" '413 "RequestEntityTooLarge"' "$CODE $(jq -c .reason "$TMP/body")"

req POST $PODS '{}' application/vnd.kubernetes.protobuf
expect_eq "unknown body format" 415 "$CODE"

# --- update: conflict, unconditional, no-op
req GET $PODS/p1
CUR=$BODY
STALE=$(printf '%s' "$CUR" | jq -c '.metadata.resourceVersion="1" | .metadata.labels.v="2"')
req PUT $PODS/p1 "$STALE"
expect_eq "stale update" '409 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on pods \"p1\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"p1","kind":"pods"},"code":409}' "$CODE $BODY"

req PUT $PODS/p1 "$(printf '%s' "$CUR" | jq -c 'del(.metadata.resourceVersion) | .metadata.labels.v="3" | .status.phase="Running"')"
expect_eq "unconditional update (built-in)" '200 "3" "Pending"' "$CODE $(jqb .metadata.labels.v) $(jqb .status.phase)"
RV2=$(jqr .metadata.resourceVersion)
[ "$RV2" -gt "$RV1" ] && pass || fail "resourceVersion grows ($RV1 -> $RV2)"

req PUT $PODS/p1 "$BODY"
expect_eq "no-op update keeps resourceVersion" "200 \"$RV2\"" "$CODE $(jqb .metadata.resourceVersion)"

req PUT $PODS/p2 "$(printf '%s' "$POD" | jq -c '.metadata.name="p2"')"
expect_eq "update of missing pod" 404 "$CODE"

req PUT $PODS/p1 "$(printf '%s' "$CUR" | jq -c '.metadata.name="other"')"
expect_eq "name mismatch" '400 "the name of the object (other) does not match the name on the URL (p1)"' "$CODE $(jqb .message)"

# leases are created by PUT (kube's AllowCreateOnUpdate)
req PUT /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/leader '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"leader"},"spec":{"holderIdentity":"a"}}'
expect_eq "lease create on update" '201 "a"' "$CODE $(jqb .spec.holderIdentity)"

# --- status subresource on pods
req PATCH $PODS/p1/status '{"status":{"phase":"Running"},"metadata":{"labels":{"ignored":"yes"}}}' application/merge-patch+json
expect_eq "pod status write" '200 "Running" null' "$CODE $(jqb .status.phase) $(jqb .metadata.labels.ignored)"

# --- generateName, dry run
req POST $PODS '{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"gen-"},"spec":{"containers":[{"name":"c","image":"i"}]}}'
expect_match "generateName" '^201 "gen-[a-z0-9]{5}"$' "$CODE $(jqb .metadata.name)"

req POST "$PODS?dryRun=All" "$(printf '%s' "$POD" | jq -c '.metadata.name="dry"')"
expect_eq "dry-run create" '201 null' "$CODE $(jqb .metadata.resourceVersion)"
req GET $PODS/dry
expect_eq "dry-run create stores nothing" 404 "$CODE"
req POST "$PODS?dryRun=Some" "$POD"
expect_eq "bad dryRun" 400 "$CODE"

# --- patches
req PATCH $PODS/p1 '[{"op":"add","path":"/metadata/labels/tier","value":"gold"},{"op":"test","path":"/metadata/labels/app","value":"x"}]' application/json-patch+json
expect_eq "json patch" '200 "gold"' "$CODE $(jqb .metadata.labels.tier)"
req PATCH $PODS/p1 '[{"op":"test","path":"/metadata/labels/app","value":"nope"}]' application/json-patch+json
expect_eq "json patch test fails" 422 "$CODE"
req PATCH $PODS/p1 '{"spec":{"containers":[{"name":"c","image":"busybox:2"},{"name":"side","image":"envoy"}]}}' application/strategic-merge-patch+json
expect_eq "strategic merge by name" '200 [["c","busybox:2"],["side","envoy"]]' "$CODE $(jqb '[.spec.containers[]|[.name,.image]]')"
req PATCH $PODS/p1 '{"spec":{"containers":[{"name":"side","$patch":"delete"}]}}' application/strategic-merge-patch+json
expect_eq "strategic delete directive" '200 ["c"]' "$CODE $(jqb '[.spec.containers[].name]')"
req PATCH $PODS/p1 '{"metadata":{"resourceVersion":"1"}}' application/merge-patch+json
expect_eq "patch with stale resourceVersion" '409 "Conflict"' "$CODE $(jqb .reason)"
req PATCH $PODS/nope '{}' application/merge-patch+json
expect_eq "patch missing object" 404 "$CODE"
req PATCH $PODS/p1 '{}' application/apply-patch+yaml
expect_eq "server-side apply unsupported" '415 "UnsupportedMediaType"' "$CODE $(jqb .reason)"

# --- delete: pods return the object; configmaps a Success Status; finalizers hold
req DELETE $PODS/p1
expect_eq "delete pod returns it" '200 "Pod" "p1"' "$CODE $(jqb .kind) $(jqb .metadata.name)"
req GET $PODS/p1
expect_eq "pod gone" 404 "$CODE"
req DELETE $PODS/p1
expect_eq "delete missing" 404 "$CODE"

CMS=/api/v1/namespaces/default/configmaps
req POST $CMS '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"},"data":{"a":"b"}}'
UID1=$(jqr .metadata.uid)
req DELETE $CMS/c1
expect_eq "delete configmap status" "200 {\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"details\":{\"name\":\"c1\",\"kind\":\"configmaps\",\"uid\":\"$UID1\"}}" "$CODE $BODY"

req POST $CMS '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"f1","finalizers":["example.com/hold"]}}'
req DELETE $CMS/f1 '{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-4000-8000-000000000000"}}'
expect_eq "delete precondition" '409 "Conflict"' "$CODE $(jqb .reason)"
req DELETE $CMS/f1
expect_match "delete with finalizer keeps it" '^200 "[0-9T:Z-]+"$' "$CODE $(jqb .metadata.deletionTimestamp)"
req GET $CMS/f1
expect_eq "still there" 200 "$CODE"
req PATCH $CMS/f1 '{"metadata":{"finalizers":null}}' application/merge-patch+json
expect_eq "removing last finalizer" 200 "$CODE"
req GET $CMS/f1
expect_eq "then it is gone" 404 "$CODE"

# --- secrets: stringData is merged into data
SECRETS=/api/v1/namespaces/default/secrets
req POST $SECRETS '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1"},"data":{"a":"YQ=="},"stringData":{"b":"hello"}}'
expect_eq "secret stringData" '201 {"a":"YQ==","b":"aGVsbG8="} null "Opaque"' "$CODE $(jqb .data) $(jqb .stringData) $(jqb .type)"

# --- namespaces: delete removes content; system namespaces are protected
req DELETE /api/v1/namespaces/default
expect_eq "default is protected" '403 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"namespaces \"default\" is forbidden: this namespace may not be deleted","reason":"Forbidden","details":{"name":"default","kind":"namespaces"},"code":403}' "$CODE $BODY"
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"tmp"}}'
expect_eq "namespace create" '201 "Active" "tmp"' "$CODE $(jqb .status.phase) $(jqb '.metadata.labels["kubernetes.io/metadata.name"]')"
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a.b"}}'
expect_eq "namespace names are DNS labels" 422 "$CODE"
req POST /api/v1/namespaces/tmp/pods "$POD"
req DELETE /api/v1/namespaces/tmp
expect_eq "namespace delete" '200 "Terminating"' "$CODE $(jqb .status.phase)"
req GET /api/v1/namespaces/tmp/pods/p1
expect_eq "namespace content deleted" 404 "$CODE"

# --- list: selectors, sort order, pagination
for n in b a d c; do
    req POST $PODS "$(printf '%s' "$POD" | jq -c --arg n "s-$n" --arg t "$n" '.metadata.name=$n | .metadata.labels.t=$t')"
done
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}'
req POST /api/v1/namespaces/other/pods "$(printf '%s' "$POD" | jq -c '.metadata.name="s-a"')"
req GET '/api/v1/pods?labelSelector=t'
expect_eq "list all namespaces, sorted" '200 "PodList" "v1" ["default/s-a","default/s-b","default/s-c","default/s-d"]' "$CODE $(jqb .kind) $(jqb .apiVersion) $(jqb '[.items[]|.metadata.namespace+"/"+.metadata.name]')"
expect_eq "list items carry no TypeMeta" 'null' "$(jqb .items[0].kind)"
req GET '/api/v1/pods?labelSelector=app%3Dx'
expect_eq "all-namespace list" '["default/s-a","default/s-b","default/s-c","default/s-d","other/s-a"]' "$(jqb '[.items[]|.metadata.namespace+"/"+.metadata.name]')"
sel() { req GET "$PODS?labelSelector=$(jq -rn --arg s "$1" '$s|@uri')"; jqb '[.items[].metadata.name]'; }
expect_eq "t in (a,c)" '["s-a","s-c"]' "$(sel 't in (a, c)')"
expect_eq "t notin (a,c)" '["gen-x","s-b","s-d"]' "$(sel 't notin (a,c)' | sed 's/"gen-[a-z0-9]*"/"gen-x"/')"
expect_eq "t!=a,t" '["s-b","s-c","s-d"]' "$(sel 't!=a,t')"
expect_eq "!t" '["gen-x"]' "$(sel '!t' | sed 's/"gen-[a-z0-9]*"/"gen-x"/')"
expect_eq "t==b" '["s-b"]' "$(sel 't==b')"
req GET "$PODS?labelSelector=t%20in%20(a"
expect_eq "bad label selector" '400 "BadRequest"' "$CODE $(jqb .reason)"
req GET "$PODS?fieldSelector=metadata.name%3Ds-b"
expect_eq "field selector =" '["s-b"]' "$(jqb '[.items[].metadata.name]')"
req GET "$PODS?fieldSelector=status.phase!%3DPending"
expect_eq "field selector !=" '[]' "$(jqb '[.items[].metadata.name]')"
req GET "$PODS?fieldSelector=spec.nope%3Dx"
expect_eq "unsupported field" '400 "field label not supported: spec.nope"' "$CODE $(jqb .message)"

req GET "$PODS?limit=2&labelSelector=t"
expect_eq "page 1" '["s-a","s-b"] null' "$(jqb '[.items[].metadata.name]') $(jqb .metadata.remainingItemCount)"
LRV=$(jqb .metadata.resourceVersion)
C=$(jqr .metadata.continue)
req GET "$PODS?limit=2&labelSelector=t&continue=$C"
expect_eq "page 2" "[\"s-c\",\"s-d\"] null $LRV" "$(jqb '[.items[].metadata.name]') $(jqb .metadata.continue) $(jqb .metadata.resourceVersion)"
req POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default-x"}}'
req POST /api/v1/namespaces/default-x/pods "$(printf '%s' "$POD" | jq -c '.metadata.name="a" | .metadata.labels.t="x"')"
ALL=()
C=""
while :; do
    req GET "/api/v1/pods?labelSelector=t&limit=1${C:+&continue=$C}"
    ALL+=("$(jqr '.items[]|.metadata.namespace+"/"+.metadata.name')")
    C=$(jqr '.metadata.continue // empty')
    [ -n "$C" ] || break
done
# etcd orders keys bytewise: ".../default-x/a" sorts before ".../default/s-a"
expect_eq "paging across namespaces that share a prefix" 'default-x/a default/s-a default/s-b default/s-c default/s-d' "${ALL[*]}"
req GET "$PODS?limit=3"
expect_eq "remainingItemCount" '2' "$(jqb .metadata.remainingItemCount)"
req PATCH $PODS/s-b '{"metadata":{"labels":{"t":"bb"}}}' application/merge-patch+json
req GET "$PODS?limit=1&continue=$(printf '{"v":"meta.k8s.io/v1","rv":0,"start":"default/s-a"}' | base64 -w0 | tr '+/' '-_' | tr -d =)"
expect_eq "a list shows the state after the last write" '["s-b"] "bb" 2 null' "$(jqb '[.items[].metadata.name]') $(jqb .items[0].metadata.labels.t) $(jqb .metadata.remainingItemCount) $(jqb .items[0].kind)"
req PATCH $PODS/s-b '{"metadata":{"labels":{"t":"b"}}}' application/merge-patch+json
req GET "$PODS?limit=2&continue=garbage"
expect_eq "bad continue" '400 "BadRequest"' "$CODE $(jqb .reason)"

# --- delete collection
req DELETE "$PODS?labelSelector=t%20in%20(a,b)"
expect_eq "deletecollection" '200 ["s-a","s-b"]' "$CODE $(jqb '[.items[].metadata.name]')"

# --- CRD validation
req POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions '{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.pods"},"spec":{"group":"pods","scope":"Namespaced","names":{"plural":"things","kind":"Thing"},"versions":[{"name":"v1","served":true,"storage":true}]}}'
expect_eq "CRD group needs a dot" '422 "CustomResourceDefinition.apiextensions.k8s.io \"things.pods\" is invalid: spec.group: Invalid value: \"pods\": should be a domain with at least one dot"' "$CODE $(jqb .message)"
req POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions '{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"wrong.example.com"},"spec":{"group":"example.com","scope":"Sideways","names":{"plural":"things","kind":"Thing"},"versions":[{"name":"v1","served":true,"storage":true}]}}'
expect_eq "CRD name and scope" '422 ["spec.scope","metadata.name"]' "$CODE $(jqb '[.details.causes[].field]')"

# --- abuse: odd methods, paths and bodies never crash the server
req PROPFIND $PODS
expect_eq "unknown method" '405 "MethodNotAllowed"' "$CODE $(jqb .reason)"
req GET "/api/v1/namespaces/default/pods/$(head -c 400 /dev/zero | tr '\0' a)"
expect_eq "overlong path segment" 404 "$CODE"
req GET /api/v1/namespaces/default/pods/a/b/c/d
expect_eq "too many segments" 404 "$CODE"
req GET /api/v1/namespaces/default/pods/a/logs
expect_eq "unknown subresource" 404 "$CODE"
req GET "/api/v1/namespaces/default/pods/%ZZ"
expect_eq "bad percent-encoding" 404 "$CODE"
req PUT $PODS/p9 'null'
expect_eq "null body" 400 "$CODE"
req PUT $PODS/p9 '[1,2]'
expect_eq "array body" 400 "$CODE"
req POST $PODS '{"apiVersion":"v1","kind":"Pod","metadata":"x"}'
expect_eq "metadata not an object" 400 "$CODE"
req POST $PODS '{"apiVersion":1,"kind":"Pod"}'
expect_eq "apiVersion not a string" 400 "$CODE"
req PATCH $PODS/s-c 'not json' application/merge-patch+json
expect_eq "patch not json" 400 "$CODE"
req PATCH $PODS/s-c '{"kind":"Secret"}' application/merge-patch+json
expect_eq "patch changing kind" 400 "$CODE"
req PATCH $PODS/s-c '[{"op":"remove","path":""}]' application/json-patch+json
expect_eq "patch removing the document" 422 "$CODE"
req GET "$PODS?limit=-5&labelSelector=$(head -c 5000 /dev/zero | tr '\0' a)"
expect_eq "overlong selector" '400 "BadRequest"' "$CODE $(jqb .reason)"
CODE=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 60000 /dev/zero | tr '\0' a)" "$S/version")
expect_match "oversized header refused" '^(431|413|400)$' "$CODE"
req GET /version
expect_eq "still serving" 200 "$CODE"

# --- discovery
req GET /api
expect_eq "/api" '"APIVersions" ["v1"]' "$(jqb .kind) $(jqb .versions)"
req GET /api/v1
expect_eq "/api/v1 pods" '{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["po"],"categories":["all"]}' "$(jqb '.resources[]|select(.name=="pods")')"
expect_eq "/api/v1 pods/status" '{"name":"pods/status","singularName":"","namespaced":true,"kind":"Pod","verbs":["get","patch","update"]}' "$(jqb '.resources[]|select(.name=="pods/status")')"
req GET /apis
expect_eq "/apis" '["apps","policy","networking.k8s.io","rbac.authorization.k8s.io","coordination.k8s.io","admissionregistration.k8s.io","apiextensions.k8s.io"]' "$(jqb '[.groups[].name]')"
req GET /version
expect_eq "/version" '"1" "32"' "$(jqb .major) $(jqb .minor)"

finish
