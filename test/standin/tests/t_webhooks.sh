#!/usr/bin/env bash
# Admission webhooks: mutating then validating, service references with a
# caBundle and SNI, url clients, selectors, reinvocation, denial format,
# warnings, failurePolicy and timeouts, dry run.
. "$(dirname "$0")/lib.sh"
HERE=$(dirname "$0")

# A CA and a serving certificate for hook.gq.svc (and 127.0.0.1 for url clients).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/ca.key" -out "$TMP/ca.pem" -days 1 -subj /CN=test-ca >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -keyout "$TMP/hook.key" -out "$TMP/hook.csr" -subj /CN=hook.gq.svc >/dev/null 2>&1
printf 'subjectAltName=DNS:hook.gq.svc,IP:127.0.0.1\n' >"$TMP/ext"
openssl x509 -req -in "$TMP/hook.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial -out "$TMP/hook.pem" -days 1 -extfile "$TMP/ext" >/dev/null 2>&1
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/other.key" -out "$TMP/other.pem" -days 1 -subj /CN=other-ca >/dev/null 2>&1
CA=$(base64 -w0 "$TMP/ca.pem")
OTHER_CA=$(base64 -w0 "$TMP/other.pem")

python3 "$HERE/hook.py" "$TMP/hook.pem" "$TMP/hook.key" "$TMP/log" >"$TMP/hook.out" 2>"$TMP/hook.err" &
HPID=$!
trap 'kill $HPID 2>/dev/null; wait $HPID 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do grep -q '^port ' "$TMP/hook.out" 2>/dev/null && break; sleep 0.05; done
HP=$(sed -n 's/^port //p' "$TMP/hook.out")
[ -n "$HP" ] || { echo "hook did not start"; cat "$TMP/hook.err"; exit 1; }
standin_start --service "127.0.0.1:$HP"

MWC=/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations
VWC=/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations
PODS=/api/v1/namespaces/default/pods
RULES='[{"operations":["CREATE","UPDATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}]'
svc_hook() { # NAME PATH [extra json fields]
    printf '{"name":"%s","clientConfig":{"service":{"namespace":"gq","name":"hook","path":"%s","port":443},"caBundle":"%s"},"rules":%s,"sideEffects":"None","admissionReviewVersions":["v1"]%s}' "$1" "$2" "$CA" "$RULES" "${3:-}"
}
pod() { # NAME [labels json]
    printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","labels":%s},"spec":{"containers":[{"name":"c","image":"i"}]}}' "$1" "${2:-{\}}"
}

req POST $MWC "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"MutatingWebhookConfiguration\",\"metadata\":{\"name\":\"a-mutate\"},\"webhooks\":[$(svc_hook mutate.gq.io /mutate ',"reinvocationPolicy":"IfNeeded","namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system"]}]}')]}"
expect_eq "mutating configuration stored" '201 1' "$CODE $(jqb .metadata.generation)"
req POST $MWC "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"MutatingWebhookConfiguration\",\"metadata\":{\"name\":\"b-late\"},\"webhooks\":[{\"name\":\"late.gq.io\",\"clientConfig\":{\"url\":\"https://127.0.0.1:$HP/mutate-late\",\"caBundle\":\"$CA\"},\"rules\":$RULES,\"sideEffects\":\"None\",\"admissionReviewVersions\":[\"v1\"],\"objectSelector\":{\"matchLabels\":{\"late-please\":\"yes\"}}}]}"
req POST $VWC "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"validate\"},\"webhooks\":[$(svc_hook validate.gq.io /validate ',"failurePolicy":"Fail"')]}"
expect_eq "validating configuration stored" 201 "$CODE"

# mutation via a service reference; the review as kube-apiserver sends it
: >"$TMP/log"
CODE=$(curl -s -D "$TMP/hdr" -o "$TMP/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary "$(pod p1)" "$S$PODS")
BODY=$(cat "$TMP/body")
expect_eq "mutated on create" '201 {"mutated":"1"}' "$CODE $(jqb .metadata.labels)"
expect_eq "warning header" 'Warning: 299 - "mutated by test hook"' "$(grep -i '^Warning:' "$TMP/hdr" | tr -d '\r')"
expect_eq "service call: path, SNI/Host" '"/mutate?timeout=10s" "hook.gq.svc"' "$(head -1 "$TMP/log" | jq -c .path) $(head -1 "$TMP/log" | jq -c .host)"
expect_eq "review request" '{"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"requestKind":{"group":"","version":"v1","kind":"Pod"},"requestResource":{"group":"","version":"v1","resource":"pods"},"name":"p1","namespace":"default","operation":"CREATE","userInfo":{"username":"kubernetes-admin","groups":["kubeadm:cluster-admins","system:authenticated"]},"oldObject":null,"dryRun":false,"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}' \
    "$(head -1 "$TMP/log" | jq -c '.request|del(.uid,.object)')"
expect_eq "validating hook saw the mutated object" '"/validate?timeout=10s" {"mutated":"1"}' "$(sed -n 2p "$TMP/log" | jq -c .path) $(sed -n 2p "$TMP/log" | jq -c .request.object.metadata.labels)"
expect_eq "two calls" 2 "$(wc -l <"$TMP/log")"

# What webhooks see, as kube-apiserver sends it: mutating webhooks get the
# decoded, defaulted pod (requests copied from limits, canonical quantities,
# scheduler, priority, ...) and, for generateName, no name, uid or
# creationTimestamp yet; validating webhooks get the generated name, the uid
# and the creationTimestamp that are then stored.
: >"$TMP/log"
req POST $PODS '{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"gen-"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"nvidia.com/gpu":"0.5","cpu":1,"memory":"1024Mi"},"requests":{"cpu":0.5}}}]}}'
expect_eq "generateName pod created" 201 "$CODE"
STORED=$(jqb '.metadata | {name, uid, creationTimestamp}')
expect_eq "mutating review: no name, uid or creationTimestamp yet" '{"name":null,"generateName":"gen-","objName":null,"uid":null,"creationTimestamp":null}' \
    "$(head -1 "$TMP/log" | jq -c '.request | {name, generateName: .object.metadata.generateName, objName: .object.metadata.name, uid: .object.metadata.uid, creationTimestamp: .object.metadata.creationTimestamp}')"
expect_eq "mutating review: resources defaulted and canonical" '{"limits":{"cpu":"1","memory":"1Gi","nvidia.com/gpu":"500m"},"requests":{"cpu":"500m","memory":"1Gi","nvidia.com/gpu":"500m"}}' \
    "$(head -1 "$TMP/log" | jq -c -S '.request.object.spec.containers[0].resources')"
expect_eq "mutating review: pod defaults" '{"dnsPolicy":"ClusterFirst","enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","priority":0,"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"serviceAccountName":"default","terminationGracePeriodSeconds":30}' \
    "$(head -1 "$TMP/log" | jq -c -S '.request.object.spec | del(.containers)')"
expect_eq "validating review: the stored name, uid and creationTimestamp" "$STORED" \
    "$(sed -n 2p "$TMP/log" | jq -c '.request.object.metadata | {name, uid, creationTimestamp}')"
expect_eq "validating review: request.name is the generated name" "$(jqb .metadata.name)" "$(sed -n 2p "$TMP/log" | jq -c .request.name)"
req POST $PODS '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"badq"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"lots"}}}]}}'
expect_eq "a quantity that does not parse is refused before any webhook" '400 "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '"'"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"'"'" 2' \
    "$CODE $(jqb .message) $(wc -l <"$TMP/log")"

# objectSelector picks the url webhook; its change reinvokes the IfNeeded one
: >"$TMP/log"
req POST $PODS "$(pod p2 '{"late-please":"yes"}')"
expect_eq "reinvocation" '201 {"late":"yes","late-please":"yes","mutated":"2"}' "$CODE $(printf '%s' "$BODY" | jq -c -S .metadata.labels)"
expect_eq "call order" '"/mutate" "/mutate-late" "/mutate" "/validate"' "$(jq -r '.path|split("?")[0]' "$TMP/log" | sed 's/.*/"&"/' | tr '\n' ' ' | sed 's/ $//')"

# namespaceSelector excludes kube-system
: >"$TMP/log"
req POST /api/v1/namespaces/kube-system/pods "$(pod p3)"
expect_eq "namespaceSelector" '201 {} 1' "$CODE $(jqb .metadata.labels) $(wc -l <"$TMP/log")"

# denial in the Kubernetes format, nothing stored
req POST $PODS "$(pod p4 '{"deny":"yes"}')"
expect_eq "denied" '403 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"admission webhook \"validate.gq.io\" denied the request: pods labelled deny=yes are not allowed","reason":"Forbidden","code":403}' "$CODE $BODY"
req GET $PODS/p4
expect_eq "denied pod not stored" 404 "$CODE"
printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: p5\n  labels: {deny: "yes"}\nspec:\n  containers: [{name: c, image: i}]\n' >"$TMP/p5.yaml"
expect_eq "kubectl shows the warning and the denial" 'Warning: mutated by test hook
Error from server (Forbidden): error when creating "'"$TMP/p5.yaml"'": admission webhook "validate.gq.io" denied the request: pods labelled deny=yes are not allowed' "$(timeout 30 kubectl create -f "$TMP/p5.yaml" 2>&1)"

# UPDATE carries oldObject; X-Standin-User sets the user
: >"$TMP/log"
CODE=$(curl -s -o "$TMP/body" -w '%{http_code}' -X PATCH -H 'X-Standin-User: alice' -H 'Content-Type: application/merge-patch+json' --data-binary '{"metadata":{"labels":{"x":"y"}}}' "$S$PODS/p1")
expect_eq "update mutated" '200 {"mutated":"2","x":"y"}' "$CODE $(jq -c -S .metadata.labels "$TMP/body")"
expect_eq "update review" '"UPDATE" {"mutated":"1"} {"username":"alice","groups":["system:authenticated"]} "UpdateOptions"' "$(head -1 "$TMP/log" | jq -c '.request|.operation,.oldObject.metadata.labels,.userInfo,.options.kind' | tr '\n' ' ' | sed 's/ $//')"
req PATCH $PODS/p1/status '{"status":{"phase":"Running"}}' application/merge-patch+json
expect_eq "status writes skip pod webhooks" '200 2' "$CODE $(wc -l <"$TMP/log")"

# dry run: webhooks see dryRun; nothing stored
: >"$TMP/log"
req POST "$PODS?dryRun=All" "$(pod p6)"
expect_eq "dry run" '201 true' "$CODE $(head -1 "$TMP/log" | jq -c .request.dryRun)"
req GET $PODS/p6
expect_eq "dry run not stored" 404 "$CODE"

# objectSelector is evaluated on the object as earlier webhooks changed it
req POST $MWC "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"MutatingWebhookConfiguration\",\"metadata\":{\"name\":\"c-after\"},\"webhooks\":[{\"name\":\"after.gq.io\",\"clientConfig\":{\"url\":\"https://127.0.0.1:$HP/mutate-late\",\"caBundle\":\"$CA\"},\"rules\":$RULES,\"sideEffects\":\"None\",\"admissionReviewVersions\":[\"v1\"],\"objectSelector\":{\"matchExpressions\":[{\"key\":\"mutated\",\"operator\":\"In\",\"values\":[\"1\"]}]}}]}"
req POST $PODS "$(pod p7)"
expect_eq "selector sees earlier mutation" '201 {"late":"yes","mutated":"2"}' "$CODE $(printf '%s' "$BODY" | jq -c -S .metadata.labels)"
req DELETE $MWC/c-after

# failures: timeout, wrong uid, untrusted certificate; failurePolicy Fail vs Ignore
bad_hook() { # NAME PATH POLICY CABUNDLE
    req DELETE $VWC/extra
    req POST $VWC "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"extra\"},\"webhooks\":[{\"name\":\"$1\",\"clientConfig\":{\"url\":\"https://127.0.0.1:$HP$2\",\"caBundle\":\"$4\"},\"rules\":$RULES,\"sideEffects\":\"None\",\"admissionReviewVersions\":[\"v1\"],\"timeoutSeconds\":1,\"failurePolicy\":\"$3\"}]}"
}
bad_hook slow.gq.io /slow Fail "$CA"
req POST $PODS "$(pod t1)"
expect_match "timeout with Fail" '^500 "InternalError" "Internal error occurred: failed calling webhook \\"slow.gq.io\\": failed to call webhook: Post \\"https://127.0.0.1:[0-9]+/slow\?timeout=1s\\": Timeout' "$CODE $(jqb .reason) $(jqb .message)"
bad_hook slow.gq.io /slow Ignore "$CA"
req POST $PODS "$(pod t2)"
expect_eq "timeout with Ignore" 201 "$CODE"
bad_hook bad.gq.io /bad Fail "$CA"
req POST $PODS "$(pod t3)"
expect_match "wrong uid" '^500 .*expected response.uid=' "$CODE $(jqb .message)"
bad_hook tls.gq.io /validate Fail "$OTHER_CA"
req POST $PODS "$(pod t4)"
expect_match "untrusted webhook certificate" '^500 .*failed calling webhook \\"tls.gq.io\\"' "$CODE $(jqb .message)"
req DELETE $VWC/extra
req POST $VWC "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"extra\"},\"webhooks\":[$(svc_hook side.gq.io /validate ',"sideEffects":"Some"' | sed 's/"sideEffects":"None",//')]}"
req POST "$PODS?dryRun=All" "$(pod t5)"
expect_eq "dry run with side effects" '400 "admission webhook \"side.gq.io\" does not support dry run"' "$CODE $(jqb .message)"
req DELETE $VWC/extra

# kubectl apply, then apply again with one field changed: kubectl sends the
# changed webhook as a partial list entry, merged by name; its rules and
# failurePolicy must survive, or the webhook is never called again.
req DELETE $VWC/validate
vwc_yaml() { # TIMEOUT
    cat <<Y
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validate}
webhooks:
  - name: validate.gq.io
    clientConfig:
      service: {namespace: gq, name: hook, path: /validate, port: 443}
      caBundle: $CA
    rules:
      - {operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}
    failurePolicy: Fail
    sideEffects: None
    timeoutSeconds: $1
    admissionReviewVersions: [v1]
Y
}
expect_eq "kubectl apply" "validatingwebhookconfiguration.admissionregistration.k8s.io/validate created" "$(vwc_yaml 10 | kubectl apply -f - 2>&1)"
expect_eq "kubectl re-apply with a change" "validatingwebhookconfiguration.admissionregistration.k8s.io/validate configured" "$(vwc_yaml 5 | kubectl apply -f - 2>&1)"
req GET $VWC/validate
expect_eq "re-applied webhook keeps rules and failurePolicy" '[{"name":"validate.gq.io","timeoutSeconds":5,"failurePolicy":"Fail","rules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE","UPDATE"],"resources":["pods"]}]}]' \
    "$(jqb '[.webhooks[] | {name, timeoutSeconds, failurePolicy, rules}]')"
: >"$TMP/log"
req POST $PODS "$(pod r1 '{"deny":"yes"}')"
expect_eq "re-applied webhook is still called" '403 "/validate?timeout=5s"' "$CODE $(grep '/validate' "$TMP/log" | jq -c .path)"

finish
