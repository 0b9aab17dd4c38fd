#!/usr/bin/env python3
"""A scriptable admission webhook for the kube-standin tests.

usage: hook.py CERT KEY LOGFILE   (prints "port N" once listening on 127.0.0.1)
Paths: /mutate adds label mutated=<count> (JSONPatch) and a warning;
/mutate-late adds label late=yes; /validate denies pods labelled deny=yes
(code 403, message "pods labelled deny=yes are not allowed"); /slow sleeps 3 s;
/bad answers with the wrong uid. Every request is appended to LOGFILE as one
JSON line: {"path":..., "host":..., "request":...}."""
import base64, http.server, json, ssl, sys, time

cert, key, log = sys.argv[1:4]


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = body["request"]
        path = self.path.split("?")[0]
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "host": self.headers["Host"], "request": req}) + "\n")
        resp = {"uid": req["uid"], "allowed": True}
        labels = (req["object"].get("metadata") or {}).get("labels") or {}
        if path == "/mutate":
            n = str(int(labels.get("mutated", "0")) + 1)
            ops = []
            if "labels" not in req["object"]["metadata"]:
                ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
            ops.append({"op": "add", "path": "/metadata/labels/mutated", "value": n})
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
            resp["warnings"] = ["mutated by test hook"]
        elif path == "/mutate-late":
            ops = [{"op": "add", "path": "/metadata/labels/late", "value": "yes"}]
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        elif path == "/validate":
            if labels.get("deny") == "yes":
                resp = {"uid": req["uid"], "allowed": False,
                        "status": {"code": 403, "reason": "Forbidden",
                                   "message": "pods labelled deny=yes are not allowed"}}
        elif path == "/slow":
            time.sleep(3)
        elif path == "/bad":
            resp["uid"] = "wrong"
        out = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("port", srv.server_address[1], flush=True)
srv.serve_forever()
