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

pods=("$ROOT"/deploy/examples/pods/*.yaml "$data"/mutate/pin-a100-selector.yaml
      "$data"/mutate/pin-a10-annotation.yaml "$data"/mutate/affinity-merge.yaml)
for f in ann-fraction ann-memory-container hami-percent kai-memory memory-x2-a100 mig-input \
    backend-volcano fraction-500m-a10-selector init-small timeslicing-x2 whole-2; do
    pods+=("$data/pods/$f.json")
done

# Each step is one kubectl call for every pod at once; the pods are named
# after their input files (f00, f01, ...) and test/e2e/tools/forms.py pairs
# kubectl's answers and refusals up again and judges them.
forms=$ROOT/test/e2e/tools/forms.py
rm -rf "$work"
mkdir -p "$work/in"
i=0
for pod in "${pods[@]}"; do
    label=$(basename "$pod")
    id=$(printf 'f%02d' "$i")
    i=$((i + 1))
    echo "$id ${label%.*}" >>"$work/names"
    # The pod as a client sends it, without a namespace of its own.
    kubectl create --dry-run=client -o json -f "$pod" 2>/dev/null |
        jq --arg n "$id" 'del(.metadata.namespace) | .metadata.name = $n' >"$work/in/$id.json"
done
# What kube-apiserver sends: the pods defaulted (a namespace the webhooks
# skip). A fractional nvidia.com/gpu is not a valid pod until it is
# rewritten, so for those the client's pod stands in and the
# original-request annotation (which records the request as sent, "0.5"
# against "500m") is left out of the comparison.
kubectl -n e2e-forms-raw create --dry-run=server -o json -f "$work/in" \
    >"$work/sent.json" 2>"$work/sent.err"
python3 "$forms" split "$work/sent.json" "$work/sent" || fail "the defaulted pods do not parse"

for b in aliyun hami volcano mig timeslicing; do
    { cat "$data/mutate/$b.yaml"; printf 'audit:\n  path: %s/audit.log\n' "$E2E"; } >"$E2E/config.yaml"
    webhooks 1 || { fail "$b: webhook did not start"; continue; }
    rm -rf "$work/want" "$work/wantpod"
    mkdir -p "$work/want"
    while read -r id _; do
        src=$work/sent/$id.json
        [[ -f $src ]] || src=$work/in/$id.json
        st=0
        "$GQ" admit --config "$E2E/config.yaml" -o json "$src" >"$work/want/$id.json" 2>/dev/null || st=$?
        echo "$st" >"$work/want/$id.rc"
    done <"$work/names"
    kubectl -n e2e-forms create --dry-run=server -o json -f "$work/in" \
        >"$work/got.json" 2>"$work/got.err"
    # admit's rewrites as kube-apiserver would store them (defaulted again
    # after the patch, as the webhook dispatcher does).
    python3 "$forms" pods "$work/want" "$work/wantpod"
    : >"$work/wantstored.json"
    : >"$work/wantstored.err"
    if compgen -G "$work/wantpod/*.json" >/dev/null; then
        kubectl -n e2e-forms-raw create --dry-run=server -o json -f "$work/wantpod" \
            >"$work/wantstored.json" 2>"$work/wantstored.err"
    fi
    python3 "$forms" judge "$work" "$b" | tee "$work/judged"
    failures=$((failures + $(grep -c '^FAIL' "$work/judged")))
done
finish
