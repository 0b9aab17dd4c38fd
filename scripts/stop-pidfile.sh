# stop_pidfile FILE [SIGNAL [TENTHS]]: send SIGNAL (TERM) to the process whose
# pid FILE holds, wait up to TENTHS tenths of a second (100) for it to exit,
# then SIGKILL it; remove FILE. Nothing when FILE is missing. Sourced by
# scripts/local-cluster.sh, scripts/real-node.sh and test/e2e/lib.sh.
stop_pidfile() {
    local pid
    [[ -f $1 ]] || return 0
    pid=$(cat "$1")
    kill "-${2:-TERM}" "$pid" 2>/dev/null || true
    for _ in $(seq "${3:-100}"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$1"
}
