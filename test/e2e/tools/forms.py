#!/usr/bin/env python3
"""The judging half of e2e_forms (test/e2e/t_forms.sh), over whole batches.

t_forms.sh sends every request form through kube-apiserver in one kubectl
call per step, and names each pod after its input file (f00, f01, ...).
kubectl prints the objects it got back as a stream of JSON documents on
stdout and the refusals on stderr, one 'Error from server (...): error when
creating "FILE": MESSAGE' each; this tool pairs them up again by name.

  forms.py split STREAM DIR      each object of STREAM into DIR/NAME.json
  forms.py pods WANTDIR OUTDIR   the .pod of each allowed admit decision
                                 (WANTDIR/NAME.json, exit status in NAME.rc)
                                 into OUTDIR/NAME.json
  forms.py judge WORK BACKEND    compare, per pod, what kube-apiserver
                                 stored or refused with gpuquota admit's
                                 answer; prints ok/FAIL lines and a summary

WORK holds names (NAME LABEL per line), in/, sent/ (the pods kube-apiserver
defaulted without our webhooks, missing where it refused one), want/,
got.json + got.err (the dry runs through our webhooks) and
wantstored.json + wantstored.err (admit's rewrites as kube-apiserver would
store them).
"""
import difflib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubectl_results  # noqa: E402

ORIGINAL_REQUEST = "gpuquota.io/original-request"
API_ACCESS = "kube-api-access-"


def stream(path):
    """The JSON documents of a file, one after another."""
    text = open(path).read()
    dec = json.JSONDecoder()
    pos, out = 0, []
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return out
        obj, pos = dec.raw_decode(text, pos)
        out.append(obj)


def by_name(path):
    objs = {}
    for obj in stream(path):
        items = obj.get("items") if obj.get("kind", "").endswith("List") else None
        for o in items if items is not None else [obj]:
            objs[o["metadata"]["name"]] = o
    return objs


def refusals(path):
    """kubectl's stderr: the message of each refusal, by input file name."""
    refused, _ = kubectl_results.refusals(open(path).read())
    return {os.path.splitext(os.path.basename(f))[0]: m for f, m in refused.items()}


def load_or_empty(path):
    """admit's -o json answer; {} where it printed none (exit 2: bad input)."""
    try:
        return json.load(open(path))
    except ValueError:
        return {}


def strip_mounts(containers):
    if containers is None:
        return None
    for c in containers:
        mounts = [v for v in c.get("volumeMounts") or [] if not v["name"].startswith(API_ACCESS)]
        if mounts:
            c["volumeMounts"] = mounts
        else:
            c.pop("volumeMounts", None)
    return containers


def normalize(pod, exact):
    """The parts of a pod gpuquota may change, comparable across two server
    dry runs: no names, uids, times or the service-account volume's random
    suffix. Without the pod as sent, the original-request annotation (which
    records the request as the client spelled it) is left out too."""
    pod = json.loads(json.dumps(pod))
    md = pod.setdefault("metadata", {})
    for k in ("name", "generateName", "uid", "namespace", "creationTimestamp",
              "resourceVersion", "managedFields"):
        md.pop(k, None)
    ann = md.get("annotations") or {}
    ann.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if ann:
        md["annotations"] = ann
    else:
        md.pop("annotations", None)
    pod.pop("status", None)
    spec = pod.setdefault("spec", {})
    vols = [v for v in spec.get("volumes") or [] if not v["name"].startswith(API_ACCESS)]
    if vols:
        spec["volumes"] = vols
    else:
        spec.pop("volumes", None)
    strip_mounts(spec.get("containers"))
    if strip_mounts(spec.get("initContainers")) is None:
        spec.pop("initContainers", None)
    if not exact and "annotations" in md:
        md["annotations"].pop(ORIGINAL_REQUEST, None)
    return pod


def pretty(pod):
    return json.dumps(pod, indent=2, sort_keys=True).splitlines()


def cmd_split(src, outdir):
    os.makedirs(outdir, exist_ok=True)
    for name, obj in by_name(src).items():
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(obj, f)


def cmd_pods(wantdir, outdir):
    os.makedirs(outdir, exist_ok=True)
    for fn in sorted(os.listdir(wantdir)):
        name, ext = os.path.splitext(fn)
        if ext != ".json" or open(os.path.join(wantdir, name + ".rc")).read().strip() != "0":
            continue
        pod = json.load(open(os.path.join(wantdir, fn)))["pod"]
        with open(os.path.join(outdir, fn), "w") as f:
            json.dump(pod, f)


class Judge:
    def __init__(self, work, backend):
        self.work, self.b = work, backend
        self.got = by_name(os.path.join(work, "got.json"))
        self.got_err = refusals(os.path.join(work, "got.err"))
        self.stored = by_name(os.path.join(work, "wantstored.json"))
        self.stored_err = refusals(os.path.join(work, "wantstored.err"))
        self.failures = self.allowed = self.same = self.denied = 0

    def ok(self, msg, sep=" "):
        print("ok   - %s%s%s" % (self.b, sep, msg))

    def fail(self, msg, sep=" "):
        print("FAIL - %s%s%s" % (self.b, sep, msg))
        self.failures += 1

    def admitted(self, name, label, exact, st, want):
        if st != 0:
            return self.fail("%s: admitted by kube-apiserver, refused by gpuquota admit: %s"
                             % (label, want.get("status", {}).get("message")))
        self.allowed += 1
        if name not in self.stored:
            return self.fail("%s: kube-apiserver refuses gpuquota admit's rewrite: %s"
                             % (label, self.stored_err.get(name, "(no message)")))
        a = pretty(normalize(self.stored[name], exact))
        b = pretty(normalize(self.got[name], exact))
        if a == b:
            self.same += 1
            return None
        self.fail("%s: stored pod differs from gpuquota admit's:" % label)
        for line in list(difflib.unified_diff(a, b, "admit", "stored", lineterm=""))[:20]:
            print(line)
        return None

    def refused(self, name, label, exact, st, want):
        err = self.got_err.get(name, "(no message)")
        if st != 1:
            return self.fail("%s: refused by kube-apiserver, admit exit %d: %s" % (label, st, err))
        self.denied += 1
        msg = want.get("status", {}).get("message", "")
        # Without the pod as sent, the quoted request value is the client's
        # spelling ("1.5") rather than the canonical one ("1500m") that the
        # webhook saw and named.
        unquote = (lambda s: s) if exact else (lambda s: re.sub(r'"[^"]*"', '""', s))
        if "denied the request: " + unquote(msg) in unquote(err):
            return self.ok("%s: denied with gpuquota admit's message" % label)
        return self.fail("%s: denial [%s] lacks [%s]" % (label, err, msg))

    def run(self):
        for line in open(os.path.join(self.work, "names")).read().splitlines():
            name, label = line.split()
            exact = os.path.exists(os.path.join(self.work, "sent", name + ".json"))
            st = int(open(os.path.join(self.work, "want", name + ".rc")).read())
            want = load_or_empty(os.path.join(self.work, "want", name + ".json"))
            step = self.admitted if name in self.got else self.refused
            step(name, label, exact, st, want)
        if self.allowed == self.same:
            self.ok("every admitted pod stored exactly as gpuquota admit rewrote it", ": ")
        else:
            self.fail("%d admitted, %d stored as gpuquota admit rewrote them"
                      % (self.allowed, self.same), ": ")
        self.ok("%d admitted, %d denied" % (self.allowed, self.denied), ": ")
        return 1 if self.failures else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "split":
        return cmd_split(argv[2], argv[3]) or 0
    if len(argv) == 4 and argv[1] == "pods":
        return cmd_pods(argv[2], argv[3]) or 0
    if len(argv) == 4 and argv[1] == "judge":
        return Judge(argv[2], argv[3]).run()
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
