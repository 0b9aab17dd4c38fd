#!/usr/bin/env python3
"""Bounded abuse clients for the webhook's HTTPS server (tests and the abuse
benchmark). Every mode talks to 127.0.0.1 only, opens a bounded number of
connections, runs for a bounded time and prints one JSON object.

  bodies    N connections each declare a body of --length bytes; those the
            server does not refuse at once send all of it but the last 100
            bytes and idle. Reports the refusals (status, Retry-After) and
            the server's RSS (/proc/PID/status) before and while they idle.
  halfopen  N connections (from --sources, round robin) that never finish a
            request: half a TLS record (--mode tcp) or a TLS handshake and
            half a request line (--mode tls). Reports how many the server
            refused at once, how long GET /healthz took from --probe-source
            during the attack, and how many it closed within --hold seconds.
  trickle   one TLS connection that sends a request one byte every
            --interval seconds (optionally after a whole request and an idle
            pause); reports when the server closed it.
  keepalive two GET /healthz on one connection, --idle seconds apart:
            idle keep-alive connections are not subject to the read deadline.
  quiet     N connections that wait inside the TLS handshake: half of them
            send nothing, half send half a ClientHello. Reports the CPU
            seconds the server (--pid, /proc/PID/stat) spent while they
            waited --hold seconds: a server that polls properly spends
            next to none.
"""
import argparse
import json
import os
import resource
import select
import socket
import ssl
import sys
import time

# A TLS record header announcing a 512-byte handshake record, and the
# first two bytes of it: half a ClientHello.
HALF_CLIENT_HELLO = b"\x16\x03\x01\x02\x00\x01\x00"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def tls_context(ca):
    ctx = ssl.create_default_context(cafile=ca)
    return ctx


def connect(port, source, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                 source_address=(source, 0))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def tls_connect(args, source, timeout=5.0):
    raw = connect(args.port, source, timeout)
    return tls_context(args.ca).wrap_socket(raw, server_hostname=args.host)


def readable(sock, wait):
    """poll(), not select(): descriptors past 1023 are the point here."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    p = select.poll()
    p.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(p.poll(int(wait * 1000)))


def closed_by_peer(sock, wait):
    """True when the server closed (or reset) the connection within wait s."""
    try:
        if not readable(sock, wait):
            return False
        sock.setblocking(False)
        data = sock.recv(4096)
        return data == b""
    except ssl.SSLWantReadError:
        return False
    except (ConnectionError, ssl.SSLError, OSError):
        return True
    finally:
        try:
            sock.setblocking(True)
        except OSError:
            pass


def read_reply(sock, wait):
    """The status line and headers of an early reply, or None."""
    if not readable(sock, wait):
        return None
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    if not data:
        return {"status": 0, "retry_after": None}
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = int(head[0].split()[1]) if len(head[0].split()) > 1 else 0
    retry = None
    for h in head[1:]:
        if h.lower().startswith("retry-after:"):
            retry = h.split(":", 1)[1].strip()
    return {"status": status, "retry_after": retry}


def probe_healthz(args, source, timeout):
    """Milliseconds until GET /healthz answered 200, or -1."""
    t0 = time.monotonic()
    try:
        s = tls_connect(args, source, timeout)
        s.settimeout(timeout)
        s.sendall(f"GET /healthz HTTP/1.1\r\nHost: {args.host}\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        if data.startswith(b"HTTP/1.1 200"):
            return int((time.monotonic() - t0) * 1000)
    except (OSError, ssl.SSLError):
        pass
    return -1


def cmd_bodies(args):
    ports = [int(p) for p in args.ports.split(",")]
    pids = [int(p) for p in args.pids.split(",")] if args.pids else []
    before = [rss_kib(p) for p in pids]
    pending = []
    for i in range(args.count):
        args.port = ports[i % len(ports)]
        s = tls_connect(args, args.source)
        s.sendall((f"POST {args.path} HTTP/1.1\r\nHost: {args.host}\r\n"
                   "Content-Type: application/json\r\n"
                   f"Content-Length: {args.length}\r\n\r\n").encode())
        pending.append(s)
    # The server decides on each request when its headers arrive. Wait for
    # its refusals once, not per connection: a loaded machine may be slow.
    early = []
    deadline = time.monotonic() + args.early_wait
    while pending and time.monotonic() < deadline:
        for s in [s for s in pending if readable(s, 0)]:
            early.append(read_reply(s, 1.0))
            pending.remove(s)
            s.close()
        time.sleep(0.05)
    conns = []
    payload = b"x" * 65536
    for s in pending:
        left = args.length - 100
        try:
            while left > 0:
                n = min(left, len(payload))
                s.sendall(payload[:n])
                left -= n
        except (OSError, ssl.SSLError):
            early.append({"status": -1, "retry_after": None})
            s.close()
            continue
        conns.append(s)
    peak = list(before)
    deadline = time.monotonic() + args.hold
    while time.monotonic() < deadline:
        peak = [max(a, rss_kib(p)) for a, p in zip(peak, pids)]
        time.sleep(0.1)
    for s in conns:
        s.close()
    print(json.dumps({"held": len(conns), "early": early,
                      "rss_before_kib": before, "rss_peak_kib": peak}))


def cmd_halfopen(args):
    sources = args.sources.split(",")
    conns, failed = [], 0
    rss = [rss_kib(args.pid), 0] if args.pid else None
    t0 = time.monotonic()
    for i in range(args.count):
        src = sources[i % len(sources)]
        try:
            if args.mode == "tls":
                s = tls_connect(args, src, timeout=2.0)
                s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Le")
            elif args.mode == "idle":
                # one whole request, then idle on the kept-alive connection
                s = tls_connect(args, src, timeout=2.0)
                s.settimeout(5.0)
                if get_healthz(s) != 200:
                    raise OSError("no answer")
            else:
                s = connect(args.port, src, timeout=2.0)
                s.sendall(HALF_CLIENT_HELLO)
            conns.append(s)
        except (OSError, ssl.SSLError):
            failed += 1
    opened = time.monotonic() - t0
    time.sleep(0.5)
    if rss:
        rss[1] = rss_kib(args.pid)
    refused = [s for s in conns if closed_by_peer(s, 0)]
    held = [s for s in conns if s not in refused]
    probe_ms = probe_healthz(args, args.probe_source, args.probe_timeout) \
        if args.probe_source else None
    # How long the server takes to close what is left.
    t1 = time.monotonic()
    open_left = list(held)
    while open_left and time.monotonic() - t1 < args.hold:
        open_left = [s for s in open_left if not closed_by_peer(s, 0)]
        if rss:
            rss[1] = max(rss[1], rss_kib(args.pid))
        time.sleep(0.1)
    for s in conns:
        s.close()
    print(json.dumps({"connections": len(conns), "connect_failed": failed,
                      "open_seconds": round(opened, 2),
                      "refused_at_once": len(refused), "held": len(held),
                      "probe_ms": probe_ms, "still_open_after_hold": len(open_left),
                      "closed_within_s": round(time.monotonic() - t1, 2),
                      "rss_before_kib": rss[0] if rss else None,
                      "rss_peak_kib": rss[1] if rss else None}))


def get_healthz(sock):
    """One keep-alive GET /healthz on sock; its status, 0 when none came."""
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while not data.endswith(b"ok"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return int(data.split()[1]) if data.startswith(b"HTTP/1.1 ") else 0
    except (OSError, ssl.SSLError):
        return 0


def cmd_keepalive(args):
    s = tls_connect(args, args.source)
    # A connection dialled and then left unused, as Go keeps them pooled.
    time.sleep(args.idle_first)
    first = get_healthz(s)
    time.sleep(args.idle)
    second = get_healthz(s)
    s.close()
    print(json.dumps({"statuses": [first, second]}))


def cmd_trickle(args):
    s = tls_connect(args, args.source)
    if args.after_request:
        # A whole request first: the trickled one is the connection's second.
        get_healthz(s)
        time.sleep(args.idle)
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 4000
    t0 = time.monotonic()
    closed_after = -1.0
    for b in req:
        try:
            s.sendall(bytes([b]))
        except (OSError, ssl.SSLError):
            closed_after = time.monotonic() - t0
            break
        if closed_by_peer(s, args.interval):
            closed_after = time.monotonic() - t0
            break
        if time.monotonic() - t0 > args.max_seconds:
            break
    s.close()
    print(json.dumps({"closed_after_s": round(closed_after, 2)}))


def cpu_seconds(pid):
    """utime + stime of process pid, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmd_quiet(args):
    conns = []
    for i in range(args.count):
        s = connect(args.port, "127.0.0.1", timeout=2.0)
        if i % 2:
            s.sendall(HALF_CLIENT_HELLO)
        conns.append(s)
    time.sleep(0.2)  # past the accepts and the first reads
    c0 = cpu_seconds(args.pid)
    time.sleep(args.hold)
    cpu = cpu_seconds(args.pid) - c0
    still_open = len([s for s in conns if not closed_by_peer(s, 0)])
    for s in conns:
        s.close()
    print(json.dumps({"connections": len(conns), "hold_s": args.hold,
                      "server_cpu_s": round(cpu, 2), "still_open": still_open}))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ca", required=True)
    p.add_argument("--host", required=True, help="TLS server name")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bodies")
    b.add_argument("--ports", required=True, help="comma-separated (replicas)")
    b.add_argument("--pids", default="", help="comma-separated, for RSS")
    b.add_argument("--count", type=int, default=40)
    b.add_argument("--length", type=int, default=3 * 1024 * 1024)
    b.add_argument("--path", default="/mutate")
    b.add_argument("--source", default="127.0.0.1")
    b.add_argument("--early-wait", type=float, default=2.0,
                   help="how long to wait for refusals after all headers are sent")
    b.add_argument("--hold", type=float, default=1.5)
    h = sub.add_parser("halfopen")
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--count", type=int, default=1100)
    h.add_argument("--sources", default="127.0.0.2")
    h.add_argument("--mode", choices=["tcp", "tls", "idle"], default="tcp",
                   help="tcp: half a ClientHello; tls: half a request; idle: a whole "
                        "request, then idle (keep-alive)")
    h.add_argument("--probe-source", default="")
    h.add_argument("--probe-timeout", type=float, default=20.0)
    h.add_argument("--hold", type=float, default=15.0)
    h.add_argument("--pid", type=int, default=0, help="server process, for RSS")
    t = sub.add_parser("trickle")
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--source", default="127.0.0.1")
    t.add_argument("--interval", type=float, default=0.2)
    t.add_argument("--max-seconds", type=float, default=30.0)
    t.add_argument("--after-request", action="store_true",
                   help="trickle the second request of a keep-alive connection")
    t.add_argument("--idle", type=float, default=1.0,
                   help="with --after-request: idle seconds between the two")
    k = sub.add_parser("keepalive")
    k.add_argument("--port", type=int, required=True)
    k.add_argument("--source", default="127.0.0.1")
    k.add_argument("--idle", type=float, default=5.0)
    k.add_argument("--idle-first", type=float, default=0.0,
                   help="idle seconds after the TLS handshake, before the first request")
    q = sub.add_parser("quiet")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--pid", type=int, required=True, help="server process, for its CPU time")
    q.add_argument("--count", type=int, default=4)
    q.add_argument("--hold", type=float, default=2.0)
    args = p.parse_args()
    if len(sys.argv) > 1:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, 4096) if hard != resource.RLIM_INFINITY else 4096
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    {"bodies": cmd_bodies, "halfopen": cmd_halfopen, "trickle": cmd_trickle,
     "keepalive": cmd_keepalive, "quiet": cmd_quiet}[args.cmd](args)


if __name__ == "__main__":
    main()
