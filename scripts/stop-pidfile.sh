# Sourced by scripts/local-cluster.sh, scripts/real-node.sh, test/e2e/lib.sh
# and test/e2e/suite.sh.

# pid_alive PID: the process still runs. `kill -0` also succeeds on a
# zombie, a process that has exited but that its parent has not reaped yet;
# an orphan's parent is init, which may reap it only a second or two later.
pid_alive() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# stop_pidfile FILE [SIGNAL [TENTHS]]: send SIGNAL (TERM) to the process whose
# pid FILE holds, wait up to TENTHS tenths of a second (100) for it to exit,
# then SIGKILL it; remove FILE. Nothing when FILE is missing.
stop_pidfile() {
    local pid
    [[ -f $1 ]] || return 0
    pid=$(cat "$1")
    kill "-${2:-TERM}" "$pid" 2>/dev/null || true
    for _ in $(seq "${3:-100}"); do pid_alive "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$1"
}
