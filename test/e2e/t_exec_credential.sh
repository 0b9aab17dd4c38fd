#!/usr/bin/env bash
# Kubeconfigs whose user is a client-go credential plugin (exec), as EKS, GKE
# and AKS hand out: kube-apiserver authenticates bearer tokens from
# scripts/local-cluster.sh's --token-auth-file, and a plugin script prints
# one. gpuquota queue, kubectl gpuquota top and certs inject run with it; a
# credential that expires is fetched again; a 401 re-runs the plugin; a
# failing or missing plugin gives kubectl's message and exit status.
source "$ROOT/test/e2e/lib.sh"
dir=$(mktemp -d)
ctl_pid=
trap '[[ -n $ctl_pid ]] && kill "$ctl_pid" 2>/dev/null; rm -rf "$dir"' EXIT
ln -s "$GQ" "$dir/kubectl-gpuquota"
export PATH=$dir:$PATH
token=$(cut -d, -f1 "$E2E/cluster/pki/tokens.csv")
[[ -n $token ]] || fail "no token in $E2E/cluster/pki/tokens.csv"

# plugin NAME BODY: a credential plugin script; $D/NAME.runs counts its runs
# and $D/NAME.info keeps the last KUBERNETES_EXEC_INFO it was given.
plugin() {
    cat >"$dir/$1" <<EOF
#!/bin/sh
D=$dir
echo run >>"\$D/$1.runs"
printf '%s' "\$KUBERNETES_EXEC_INFO" >"\$D/$1.info"
$2
EOF
    chmod +x "$dir/$1"
}
# cred TOKEN [EXPIRY]: the ExecCredential a plugin prints.
cred() {
    printf 'cat <<EOF\n{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"%s}}\nEOF\n' \
        "$1" "${2:+,\"expirationTimestamp\":\"$2\"}"
}
runs() { [[ -f $dir/$1.runs ]] && wc -l <"$dir/$1.runs" || echo 0; }
# exec_kubeconfig FILE COMMAND [EXEC-LINES]: a kubeconfig whose user runs COMMAND.
exec_kubeconfig() {
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$APISERVER", certificate-authority: "$E2E/cluster/pki/ca.crt"}
contexts:
- name: local
  context: {cluster: local, user: sso}
current-context: local
users:
- name: sso
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: $2
      interactiveMode: Never
      provideClusterInfo: true
${3:-}
EOF
}

ns e2e-exec
quota e2e-exec team '{gpu-memory: 20Gi}'

# ------------------------------------------------------------ a good token
plugin good "$(cred "$token" "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)")"
exec_kubeconfig "$dir/good.kubeconfig" "$dir/good"
check "kubectl itself accepts the plugin's token" "e2e-exec" \
    "$(kubectl --kubeconfig "$dir/good.kubeconfig" get ns e2e-exec -o name | cut -d/ -f2)"
rm -f "$dir/good.runs"
out=$("$GQ" queue --kubeconfig "$dir/good.kubeconfig" --config "$E2E/config.yaml" -n e2e-exec 2>&1)
check "gpuquota queue runs with an exec user" "0" "$?"
check "the plugin ran once for all of queue's requests (cached until it expires)" "1" "$(runs good)"
info=$(cat "$dir/good.info")
check "the plugin is given an ExecCredential request" \
    "ExecCredential client.authentication.k8s.io/v1 false $APISERVER" \
    "$(jq -r '"\(.kind) \(.apiVersion) \(.spec.interactive) \(.spec.cluster.server)"' <<<"$info")"
check "provideClusterInfo passes the cluster's CA" "$(base64 -w0 <"$E2E/cluster/pki/ca.crt")" \
    "$(jq -r '.spec.cluster["certificate-authority-data"]' <<<"$info")"
out=$(KUBECONFIG=$dir/good.kubeconfig kubectl gpuquota top -n e2e-exec 2>&1)
check_match "kubectl gpuquota top runs with an exec user" 'namespace e2e-exec/team +gpu-memory' "$out"
out=$("$GQ" certs inject --ca "$E2E/certs/ca.crt" --kubeconfig "$dir/good.kubeconfig" 2>&1)
check "certs inject runs with an exec user" "0" "$?"
check_match "certs inject reports what it patched" 'gpuquota' "$out"

# ------------------------------------ a client certificate from the plugin
# (the cluster's admin certificate, in the ExecCredential's PEM fields)
jq -n --rawfile c "$E2E/cluster/pki/admin.crt" --rawfile k "$E2E/cluster/pki/admin.key" \
    '{apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential",
      status: {clientCertificateData: $c, clientKeyData: $k}}' >"$dir/cert.json"
plugin cert "cat '$dir/cert.json'"
exec_kubeconfig "$dir/cert.kubeconfig" "$dir/cert"
out=$("$GQ" queue --kubeconfig "$dir/cert.kubeconfig" --config "$E2E/config.yaml" -n e2e-exec 2>&1)
check "a client certificate and key from the plugin authenticate" "0 1" "$? $(runs cert)"
out=$(KUBECONFIG=$dir/cert.kubeconfig kubectl gpuquota top -n e2e-exec 2>&1)
check_match "kubectl gpuquota top too" 'namespace e2e-exec/team' "$out"

# -------------------------------------- a credential that expires is renewed
# A controller (a follower: the suite's controllers hold the lease) polls
# its Lease for a while; its token lasts 2 s.
plugin short "$(cred "$token" '$(date -u -d "+2 seconds" +%Y-%m-%dT%H:%M:%SZ)')"
exec_kubeconfig "$dir/short.kubeconfig" "$dir/short"
"$GQ" controller --kubeconfig "$dir/short.kubeconfig" --config "$E2E/config.yaml" \
    --leader-elect --lease-namespace "$NS_SYS" --metrics-listen 127.0.0.1:0 \
    >"$dir/controller.log" 2>&1 &
ctl_pid=$!
several() { (($(runs short) >= 3)); }
eventually 30 several && pass "an expired credential is fetched again ($(runs short) runs)" ||
    fail "the plugin ran $(runs short) time(s) in 30 s: $(tail -5 "$dir/controller.log")"
pid_alive "$ctl_pid" && pass "the controller keeps running on renewed credentials" ||
    fail "the controller exited: $(tail -5 "$dir/controller.log")"
grep -q -i 'unauthorized\|getting credentials' "$dir/controller.log" &&
    fail "the controller was refused: $(grep -i 'unauthorized\|getting credentials' "$dir/controller.log" | head -3)" ||
    pass "no request went out with an expired credential"
kill "$ctl_pid"
wait "$ctl_pid" 2>/dev/null
ctl_pid=

# ------------------------------------------------ a 401 re-runs the plugin
# The first run returns a token kube-apiserver does not know (revoked early).
plugin revoked "if [ \"\$(wc -l <\"\$D/revoked.runs\")\" -eq 1 ]; then
$(cred revoked-token "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)")
else
$(cred "$token")
fi"
exec_kubeconfig "$dir/revoked.kubeconfig" "$dir/revoked"
out=$("$GQ" queue --kubeconfig "$dir/revoked.kubeconfig" --config "$E2E/config.yaml" -n e2e-exec 2>&1)
check "a 401 re-runs the plugin and the request succeeds" "0 2" "$? $(runs revoked)"
rm -f "$dir/revoked.runs"
out=$(KUBECONFIG=$dir/revoked.kubeconfig kubectl gpuquota top -n e2e-exec 2>&1)
check_match "kubectl gpuquota top too" 'namespace e2e-exec/team' "$out"
# A plugin that keeps returning a refused token: one re-run, then 401.
plugin refused "$(cred revoked-token)"
exec_kubeconfig "$dir/refused.kubeconfig" "$dir/refused"
out=$("$GQ" queue --kubeconfig "$dir/refused.kubeconfig" --config "$E2E/config.yaml" -n e2e-exec 2>&1)
check "a token refused twice fails with exit 1" "1" "$?"
check_match "saying Unauthorized" 'Unauthorized' "$out"

# --------------------------------------- a failing plugin: kubectl's message
plugin failing 'echo "error: the SSO session has expired; run: aws sso login" >&2
exit 3'
exec_kubeconfig "$dir/failing.kubeconfig" "$dir/failing"
want="getting credentials: exec: executable $dir/failing failed with exit code 3"
kout=$(kubectl --kubeconfig "$dir/failing.kubeconfig" get ns 2>&1)
check "kubectl exits 1 when the plugin fails" "1" "$?"
check_match "kubectl's message" "$want" "$kout"
out=$("$GQ" queue --kubeconfig "$dir/failing.kubeconfig" --config "$E2E/config.yaml" 2>&1)
check "gpuquota queue exits 1 as kubectl does" "1" "$?"
check "with kubectl's message, after the plugin's own stderr" \
    "error: the SSO session has expired; run: aws sso login
gpuquota queue: $want" "$out"
out=$(KUBECONFIG=$dir/failing.kubeconfig kubectl gpuquota top -n e2e-exec 2>&1)
check "kubectl gpuquota top exits 1" "1" "$?"
check_match "with kubectl's message" "$want" "$out"
out=$("$GQ" certs inject --ca "$E2E/certs/ca.crt" --kubeconfig "$dir/failing.kubeconfig" 2>&1)
check "certs inject exits 1" "1" "$?"
check_match "with kubectl's message" "$want" "$out"

# ------------------------------------ a plugin not installed: the install hint
exec_kubeconfig "$dir/absent.kubeconfig" gq-absent-auth-plugin \
    '      installHint: "Install it: https://example.com/gq-absent-auth-plugin"'
kout=$(kubectl --kubeconfig "$dir/absent.kubeconfig" get ns 2>&1)
out=$("$GQ" queue --kubeconfig "$dir/absent.kubeconfig" --config "$E2E/config.yaml" 2>&1)
check "a missing plugin exits 1" "1" "$?"
hint="getting credentials: exec: executable gq-absent-auth-plugin not found

It looks like you are trying to use a client-go credential plugin that is not installed.

To learn more about this feature, consult the documentation available at:
      https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins

Install it: https://example.com/gq-absent-auth-plugin"
check "gpuquota queue gives client-go's install hint" "gpuquota queue: $hint" "$out"
[[ $kout == *"$hint"* ]] && pass "word for word as kubectl does" ||
    fail "kubectl said: $kout"

kubectl delete namespace e2e-exec --wait=false >/dev/null 2>&1
finish
