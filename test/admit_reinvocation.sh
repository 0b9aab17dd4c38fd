#!/bin/sh
# admit_reinvocation.sh GPUQUOTA CONFIG_DIR PODS_DIR: for every backend
# config and every pod, apply the patch the mutating decision returns and
# decide again with the same uid (as kube-apiserver reinvokes a webhook):
# the second decision must be allowed with no patch.
gq=$1 configs=$2 pods=$3
tmp=$(mktemp /tmp/gq-reinvoke.XXXXXX)
trap 'rm -f "$tmp"' EXIT
fail=0 n=0
for cfg in "$configs"/*.yaml; do
    for pod in "$pods"/*.yaml; do
        st=0
        "$gq" admit --config "$cfg" -o patch "$pod" >"$tmp" 2>/dev/null || st=$?
        [ "$st" -eq 0 ] || continue # denied under this backend: nothing to reinvoke
        n=$((n + 1))
        again=$("$gq" admit --config "$cfg" --patch "$tmp" -o patch "$pod")
        if [ "$again" != "[]" ]; then
            echo "FAIL $(basename "$cfg") $(basename "$pod"): second patch $again"
            fail=1
        fi
    done
done
echo "$n reinvocations checked"
[ "$n" -ge 30 ] || { echo "FAIL: too few allowed pods ($n)"; fail=1; }
exit $fail
