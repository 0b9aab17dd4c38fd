#!/usr/bin/env python3
"""What one GPUQuota status write costs kube-apiserver (docs/performance.md).

  scripts/local-cluster.sh up DIR
  kubectl --kubeconfig DIR/kubeconfig apply -f deploy/crds
  scripts/bench-status-write.py DIR [--writes 500] [--reservations 30] [--rounds 2]
                                   [--tenant-namespaces N] [--keys 1|2|3]
                                   [--no-managed-fields]

Creates namespace bench-status with GPUQuota q (recreated at every round),
then PUTs its /status --writes times in a row over one keep-alive TLS
connection, each with --reservations reservations of which one is new (as
the webhook's group commit writes them), and prints kube-apiserver's CPU
(utime + stime of DIR/kube-apiserver.pid) per write, with the size of the
stored object and of its managedFields. With --tenant-namespaces N, the
object is GPUTenantQuota bench-status instead, its status listing N
namespaces, one of whose usage changes at each write (as the controller
writes it when a pod comes or goes). --keys: how many of gpu-memory,
gpu-pods, gpus spec.hard limits (3), which is what every used carries.
Each PUT sends the object as read, metadata.managedFields included, as
gpuquota does; --no-managed-fields leaves that list out (kube-apiserver
keeps the stored one on a subresource either way). Figures only; nothing
is asserted.
Only the Python standard library; talks to the cluster of DIR (127.0.0.1).
"""
import argparse
import http.client
import json
import os
import ssl
import sys
import time
import uuid

NS = "bench-status"
GROUP = "/apis/gpuquota.io/v1alpha1"


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client:
    def __init__(self, d, port):
        ctx = ssl.create_default_context(cafile=os.path.join(d, "pki/ca.crt"))
        ctx.load_cert_chain(os.path.join(d, "pki/admin.crt"), os.path.join(d, "pki/admin.key"))
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)

    def call(self, method, path, body=None, ok=(200, 201)):
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = self.conn.getresponse()
        out = r.read()
        if r.status not in ok:
            sys.exit("%s %s: HTTP %d: %s" % (method, path, r.status, out[:300].decode(errors="replace")))
        return json.loads(out) if out else None


def fresh(c, path, body):
    """Delete the object at path/NAME, wait until it is gone, create it anew."""
    c.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NS}}, ok=(201, 409))
    item = path + "/" + body["metadata"]["name"]
    c.call("DELETE", item, ok=(200, 404))
    for _ in range(100):  # no finalizer, but the delete may not be seen at once
        c.conn.request("GET", item)
        r = c.conn.getresponse()
        r.read()
        if r.status == 404:
            break
        time.sleep(0.1)
    return c.call("POST", path, body)


KEYS = ("gpu-memory", "gpu-pods", "gpus")


def used(i, keys=3):
    """Usage as the controller writes it: the keys of spec.hard only."""
    v = {"gpu-memory": str(i * 1073741824), "gpu-pods": str(i), "gpus": "0"}
    return {k: v[k] for k in KEYS[:keys]}


def reservations(i, n):
    return [{"key": str(uuid.UUID(int=i + j)), "namespace": NS, "pod": "p-%d" % (i + j),
             "gpu-memory": "1073741824", "gpus": "0", "gpu-pods": "1",
             "expires": "2099-01-01T00:00:00Z"} for j in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="the folder of scripts/local-cluster.sh up")
    ap.add_argument("--writes", type=int, default=500)
    ap.add_argument("--reservations", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tenant-namespaces", type=int, default=0)
    ap.add_argument("--keys", type=int, default=3, choices=(1, 2, 3),
                    help="keys of spec.hard, and so of every used: gpu-memory[, gpu-pods[, gpus]]")
    ap.add_argument("--no-managed-fields", action="store_true",
                    help="leave metadata.managedFields out of each PUT")
    a = ap.parse_args()
    env = dict(l.strip().split("=", 1) for l in open(os.path.join(a.dir, "env")) if "=" in l)
    with open(os.path.join(a.dir, "kube-apiserver.pid")) as f:
        pid = int(f.read())
    c = Client(a.dir, int(env["APISERVER_PORT"]))
    hard = dict(zip(KEYS[:a.keys], ("64Gi", "10", "4")))
    if a.tenant_namespaces:
        path = GROUP + "/gputenantquotas"
        body = {"apiVersion": "gpuquota.io/v1alpha1", "kind": "GPUTenantQuota",
                "metadata": {"name": NS}, "spec": {"namespaceSelector": {
                    "matchLabels": {"tenant": NS}}, "hard": hard}}
        what = "%d namespaces" % a.tenant_namespaces
    else:
        path = GROUP + "/namespaces/%s/gpuquotas" % NS
        body = {"apiVersion": "gpuquota.io/v1alpha1", "kind": "GPUQuota",
                "metadata": {"name": "q", "namespace": NS}, "spec": {"hard": hard}}
        what = "%d reservations" % a.reservations
    item = path + "/" + body["metadata"]["name"]
    for rnd in range(1, a.rounds + 1):
        obj = fresh(c, path, body)
        time.sleep(1)
        t0, c0 = time.monotonic(), cpu_seconds(pid)
        for i in range(a.writes):
            st = {"hard": hard, "used": used(i, a.keys), "observedGeneration": 1}
            if a.tenant_namespaces:
                st["namespaces"] = [{"namespace": "ns-%04d" % k,
                                     "used": used(i if k == i % a.tenant_namespaces else 1,
                                                  a.keys)}
                                    for k in range(a.tenant_namespaces)]
            elif a.reservations:
                st["reservations"] = reservations(i, a.reservations)
            obj["status"] = st
            sent = obj
            if a.no_managed_fields:
                sent = dict(obj, metadata={k: v for k, v in obj["metadata"].items()
                                           if k != "managedFields"})
            obj = c.call("PUT", item + "/status", sent)
        dt, dc = time.monotonic() - t0, cpu_seconds(pid) - c0
        stored = len(json.dumps(obj, separators=(",", ":")))
        mf = len(json.dumps(obj["metadata"].get("managedFields", []), separators=(",", ":")))
        print("round %d: %d writes of %s, %.0f writes/s, kube-apiserver %.2f ms CPU per write; "
              "stored object %d B, its managedFields %d B"
              % (rnd, a.writes, what, a.writes / dt, dc * 1000 / a.writes, stored, mf))
    c.call("DELETE", item, ok=(200, 404))


if __name__ == "__main__":
    main()
