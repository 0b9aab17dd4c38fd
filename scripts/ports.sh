# Ports for the test tooling's servers that cannot listen on port 0 and say
# which port they got (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet's healthz). Source it; then
#   claim_port OWNER      print a free port, recorded for OWNER (a directory)
#   release_ports OWNER   forget OWNER's ports
# A port is chosen outside the kernel's ephemeral range, so no outgoing
# connection can take it between the choice and the server's bind, and it is
# recorded, under a lock, in $GQ_PORTS_DIR until its owner releases it (or
# the owner's directory is gone): two clusters started at once (ctest -j)
# never choose the same port, nor one that a cluster holds while it restarts
# kube-apiserver. Binding a port and handing on its number, as before, let a
# second cluster or a client's connection take it in between.
GQ_PORTS_DIR=${GQ_PORTS_DIR:-${TMPDIR:-/tmp}/gpuquota-ports}

claim_port() {
    mkdir -p "$GQ_PORTS_DIR" && python3 - "$GQ_PORTS_DIR" "$1" <<'PY'
import fcntl, os, random, socket, sys

root, owner = sys.argv[1], os.path.abspath(sys.argv[2])
with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    lo, hi = (int(x) for x in f.read().split())
candidates = range(10000, lo) if lo > 11000 else range(hi + 1, 65536)
with open(os.path.join(root, ".lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    for _ in range(2000):
        port = random.choice(candidates)
        record = os.path.join(root, str(port))
        try:
            with open(record) as f:
                if os.path.isdir(f.read().strip()):
                    continue  # held by a cluster that is still there
        except OSError:
            pass
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        with open(record, "w") as f:
            f.write(owner + "\n")
        print(port)
        sys.exit(0)
sys.exit("claim_port: no free port found")
PY
}

release_ports() {
    [[ -d $GQ_PORTS_DIR ]] || return 0
    python3 - "$GQ_PORTS_DIR" "$1" <<'PY'
import fcntl, os, sys

root, owner = sys.argv[1], os.path.abspath(sys.argv[2])
with open(os.path.join(root, ".lock"), "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    for name in os.listdir(root):
        if not name.isdigit():
            continue
        path = os.path.join(root, name)
        try:
            with open(path) as f:
                held_by = f.read().strip()
        except OSError:
            continue
        if held_by == owner:
            os.unlink(path)
PY
}
