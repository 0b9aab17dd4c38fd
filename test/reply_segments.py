#!/usr/bin/env python3
"""POST one body N+1 times over one keep-alive TLS connection; print the size
of the reply body and how many TCP segments carrying data the client
received for the last N replies (Linux TCP_INFO tcpi_data_segs_in). The first
reply is left out: the TLS 1.3 session tickets and libmicrohttpd's first
TCP_NODELAY share its segments.
usage: reply_segments.py PORT CA_FILE HOST PATH BODY_FILE N"""
import socket
import ssl
import struct
import sys

TCP_INFO_LEN = 232  # sizeof(struct tcp_info), Linux 5.x+
DATA_SEGS_IN = 152  # offsetof(struct tcp_info, tcpi_data_segs_in)


def main():
    port, ca, host, path, body_file, n = sys.argv[1:7]
    body = open(body_file, "rb").read()
    req = (
        "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % (path, host, len(body))
    ).encode() + body
    ctx = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
    tls = ctx.wrap_socket(raw, server_hostname=host)

    def data_segs():
        info = tls.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
        return struct.unpack_from("I", info, DATA_SEGS_IN)[0]

    def roundtrip():
        tls.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = tls.recv(65536)
            if not chunk:
                sys.exit("connection closed")
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            sys.exit("no Content-Length")
        while len(rest) < length:
            chunk = tls.recv(65536)
            if not chunk:
                sys.exit("connection closed")
            rest += chunk
        return length

    size = roundtrip()
    before = data_segs()
    for _ in range(int(n)):
        roundtrip()
    print(size, data_segs() - before)
    tls.close()


main()
