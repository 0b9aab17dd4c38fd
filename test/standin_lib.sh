# Shared by integration scripts that drive the kube-apiserver stand-in with
# real kubectl. Source it after setting: standin (the binary), work (a
# temporary directory) and pids (an array the caller's cleanup kills).
# Starts the stand-in on an ephemeral port, sets $S (its URL), writes
# $work/kubeconfig, exports KUBECONFIG and HOME, and defines k (kubectl) and
# fault (POST /standin/faults).
"$standin" --port 0 >"$work/standin.out" 2>"$work/standin.err" &
pids+=($!)
for _ in $(seq 100); do
    sport=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/standin.out")
    [[ -n "$sport" ]] && break
    sleep 0.05
done
[[ -n "${sport:-}" ]] || { echo "stand-in did not start"; cat "$work/standin.err"; exit 1; }
S=http://127.0.0.1:$sport
export KUBECONFIG=$work/kubeconfig HOME=$work
cat >"$KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters: [{name: standin, cluster: {server: "$S"}}]
contexts: [{name: standin, context: {cluster: standin, user: tester, namespace: default}}]
current-context: standin
users: [{name: tester, user: {token: test-token}}]
KC
k() { timeout 60 kubectl "$@" 2>&1; }
fault() { curl -sS -X POST -d "$1" "$S/standin/faults" >/dev/null; }
