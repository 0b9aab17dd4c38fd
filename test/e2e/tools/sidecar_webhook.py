#!/usr/bin/env python3
"""A second mutating admission webhook for the e2e suite: it adds a CPU-only
log-shipper sidecar to every pod that lacks one, as service meshes and log
agents do. Its change makes kube-apiserver reinvoke gpuquota's /mutate
(reinvocationPolicy: IfNeeded), which must then have nothing left to patch.

Usage: sidecar_webhook.py CERT KEY PORT_FILE  (listens on 127.0.0.1, an
ephemeral port written to PORT_FILE)
"""
import base64
import http.server
import json
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        review = json.loads(self.rfile.read(min(n, 3 << 20)))
        req = review["request"]
        pod = req["object"]
        resp = {"uid": req["uid"], "allowed": True}
        names = [c.get("name") for c in pod["spec"].get("containers", [])]
        if "log-shipper" not in names:
            patch = [{"op": "add", "path": "/spec/containers/-",
                      "value": {"name": "log-shipper", "image": "registry.example/shipper:1",
                                "resources": {"limits": {"cpu": "50m", "memory": "32Mi"}}}}]
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("sidecar: " + fmt % args + "\n")


def main():
    cert, key, port_file = sys.argv[1:4]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(port_file, "w") as f:
        f.write(str(srv.server_address[1]))
    srv.serve_forever()


if __name__ == "__main__":
    main()
