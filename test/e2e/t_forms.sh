#!/usr/bin/env bash
# Every request form under every backend, through kube-apiserver: the pod it
# stores after our /mutate patch is exactly what `gpuquota admit` computes
# offline from the pod kube-apiserver sends (defaulted: requests copied from
# limits, quantities canonical, schedulerName set), and a pod gpuquota
# refuses is refused with admit's message.
#
# The pod kube-apiserver sends is read back from a server dry run in a
# namespace the webhooks skip (gpuquota.io/exempt=true); the rewritten one
# from a server dry run in a namespace they serve. Dry runs are never charged,
# so no quota fills up.
source "$ROOT/test/e2e/lib.sh"
data=$ROOT/test/data
restore() {
    cp "$E2E/config.default.yaml" "$E2E/config.yaml"
    webhooks 3
    kubectl delete namespace e2e-forms e2e-forms-raw --wait=false >/dev/null 2>&1
}
trap restore EXIT
ns e2e-forms
ns e2e-forms-raw gpuquota.io/exempt=true
work=$E2E/forms
mkdir -p "$work"

pods=("$ROOT"/deploy/examples/pods/*.yaml "$data"/mutate/pin-a100-selector.yaml
      "$data"/mutate/pin-a10-annotation.yaml "$data"/mutate/affinity-merge.yaml)
for f in ann-fraction ann-memory-container hami-percent kai-memory memory-x2-a100 mig-input \
    backend-volcano fraction-500m-a10-selector init-small timeslicing-x2 whole-2; do
    pods+=("$data/pods/$f.json")
done

# The parts of a pod gpuquota may change, comparable across two server
# dry runs: no names, uids, times or the service-account volume's random suffix.
normalize() {
    jq -S 'del(.metadata.name, .metadata.generateName, .metadata.uid, .metadata.namespace,
               .metadata.creationTimestamp, .metadata.resourceVersion, .metadata.managedFields,
               .metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"],
               .status)
           | .spec.volumes |= (map(select(.name | startswith("kube-api-access-") | not)) | if length == 0 then null else . end)
           | del(.spec.volumes | nulls)
           | (.spec.containers, .spec.initContainers) |= (if . == null then null else map(
               .volumeMounts |= (map(select(.name | startswith("kube-api-access-") | not)) | if length == 0 then null else . end)
               | del(.volumeMounts | nulls)) end)
           | del(.spec.initContainers | nulls)
           | if (.metadata.annotations // {}) == {} then del(.metadata.annotations) else . end'
}

for b in aliyun hami volcano mig timeslicing; do
    { cat "$data/mutate/$b.yaml"; printf 'audit:\n  path: %s/audit.log\n' "$E2E"; } >"$E2E/config.yaml"
    webhooks 1 || { fail "$b: webhook did not start"; continue; }
    allowed=0 same=0 denied=0
    for pod in "${pods[@]}"; do
        name=$(basename "$pod")
        name=${name%.*}
        # The pod as a client sends it, without a namespace of its own.
        kubectl create --dry-run=client -o json -f "$pod" 2>/dev/null |
            jq 'del(.metadata.namespace) | .metadata.name = "p"' >"$work/in.json"
        # What kube-apiserver sends: the pod defaulted. A fractional nvidia.com/gpu
        # is not a valid pod until it is rewritten, so for those the client's
        # pod stands in and the original-request annotation (which records the
        # request as sent, "0.5" against "500m") is left out of the comparison.
        exact=1
        src=$work/sent.json
        if ! kubectl -n e2e-forms-raw create --dry-run=server -o json -f "$work/in.json" \
            >"$work/sent.json" 2>"$work/sent.err"; then
            exact=0
            src=$work/in.json
        fi
        st=0
        "$GQ" admit --config "$E2E/config.yaml" -o json "$src" >"$work/want.json" 2>/dev/null || st=$?
        if kubectl -n e2e-forms create --dry-run=server -o json -f "$work/in.json" \
            >"$work/got.json" 2>"$work/got.err"; then
            if [[ $st -ne 0 ]]; then
                fail "$b $name: admitted by kube-apiserver, refused by gpuquota admit: $(jq -r .status.message "$work/want.json")"
                continue
            fi
            allowed=$((allowed + 1))
            # admit's rewrite as kube-apiserver would store it (defaulted again
            # after the patch, as the webhook dispatcher does).
            jq '.pod' "$work/want.json" >"$work/want-pod.json"
            if ! kubectl -n e2e-forms-raw create --dry-run=server -o json -f "$work/want-pod.json" \
                >"$work/want-stored.json" 2>"$work/want.err"; then
                fail "$b $name: kube-apiserver refuses gpuquota admit's rewrite: $(cat "$work/want.err")"
                continue
            fi
            drop='.'
            ((exact)) || drop='del(.metadata.annotations["gpuquota.io/original-request"])'
            if [[ "$(normalize <"$work/want-stored.json" | jq -S "$drop")" == \
                "$(normalize <"$work/got.json" | jq -S "$drop")" ]]; then
                same=$((same + 1))
            else
                fail "$b $name: stored pod differs from gpuquota admit's:"
                diff <(normalize <"$work/want-stored.json" | jq -S "$drop") \
                    <(normalize <"$work/got.json" | jq -S "$drop") | head -20
            fi
        else
            if [[ $st -eq 1 ]]; then
                denied=$((denied + 1))
                msg=$(jq -r .status.message "$work/want.json")
                # Without the pod as sent, the quoted request value is the
                # client's spelling ("1.5") rather than the canonical one
                # ("1500m") that the webhook saw and named.
                unquote=(cat)
                ((exact)) || unquote=(sed 's/"[^"]*"/""/g')
                if "${unquote[@]}" <"$work/got.err" |
                    grep -qF -- "denied the request: $("${unquote[@]}" <<<"$msg")"; then
                    pass "$b $name: denied with gpuquota admit's message"
                else
                    fail "$b $name: denial [$(cat "$work/got.err")] lacks [$msg]"
                fi
            else
                fail "$b $name: refused by kube-apiserver, admit exit $st: $(cat "$work/got.err")"
            fi
        fi
    done
    check "$b: every admitted pod stored exactly as gpuquota admit rewrote it" "$allowed" "$same"
    pass "$b: $allowed admitted, $denied denied"
done
finish
