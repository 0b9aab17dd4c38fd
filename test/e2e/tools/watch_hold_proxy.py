#!/usr/bin/env python3
"""A TLS proxy in front of kube-apiserver that can hold watches down.

    watch_hold_proxy.py --cert C --key K --ca CA --upstream HOST:PORT --hold-file F

Listens on 127.0.0.1 (port 0; prints the port on its first line), serves
TLS with the given pair, and forwards each HTTP/1.1 request to the upstream
over TLS (verified with CA), one upstream connection per request
("Connection: close"), bytes streamed as they come. While the file F
exists, a watch request (?watch=1 or ?watch=true) is held: read, never
forwarded nor answered, so the client's watch never starts; every other
request still goes through. When F appears, every connection open at that
moment is closed, so watches already running break and reconnect into the
hold. The e2e suite uses it to keep one webhook replica's caches from
being fresh, for as long as a test needs, while its live reads work
(test/e2e/t_ha.sh).
"""
import argparse
import os
import socket
import ssl
import sys
import threading
import time

lock = threading.Lock()
live = set()  # downstream sockets being served
held_now = False


def track(sock, add):
    with lock:
        (live.add if add else live.discard)(sock)


def read_head(f):
    """The request line and header lines, or None at EOF."""
    lines = []
    while True:
        line = f.readline(65537)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line)


def serve(conn, args, ctx_up):
    track(conn, True)
    f = conn.makefile("rb")
    try:
        while True:
            head = read_head(f)
            if not head:
                return
            request_line = head[0].decode("latin-1")
            length = 0
            headers = []
            for h in head[1:]:
                name = h.split(b":", 1)[0].strip().lower()
                if name == b"content-length":
                    length = int(h.split(b":", 1)[1])
                if name in (b"connection", b"keep-alive"):
                    continue
                headers.append(h)
            body = f.read(length) if length else b""
            target = request_line.split(" ")[1] if " " in request_line else ""
            if os.path.exists(args.hold_file) and ("watch=1" in target or "watch=true" in target):
                # Held: the client waits for a response that never comes.
                print("held watch %s" % target.split("?")[0], file=sys.stderr, flush=True)
                while os.path.exists(args.hold_file) and conn.fileno() >= 0:
                    time.sleep(0.05)
                return
            host, port = args.upstream.rsplit(":", 1)
            raw = socket.create_connection((host, int(port)), timeout=30)
            up = ctx_up.wrap_socket(raw, server_hostname=host)
            up.settimeout(None)
            up.sendall(head[0] + b"".join(headers) + b"Connection: close\r\n\r\n" + body)
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                conn.sendall(chunk)
            up.close()
            return  # the response said Connection: close
    except (OSError, ValueError):
        return
    finally:
        track(conn, False)
        try:
            conn.close()
        except OSError:
            pass


def watch_hold_file(args):
    global held_now
    while True:
        held = os.path.exists(args.hold_file)
        if held and not held_now:
            with lock:
                for s in list(live):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
        held_now = held
        time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--hold-file", required=True)
    args = p.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.set_alpn_protocols(["http/1.1"])
    ctx_up = ssl.create_default_context(cafile=args.ca)
    ctx_up.set_alpn_protocols(["http/1.1"])
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    print(ls.getsockname()[1], flush=True)
    threading.Thread(target=watch_hold_file, args=(args,), daemon=True).start()
    while True:
        raw, _ = ls.accept()
        try:
            conn = ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(conn, args, ctx_up), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
