#!/usr/bin/env python3
"""Check GPU memory held per namespace at every pod change, from a watch.

    kubectl get pods -A -w -o json --output-watch-events | \
        held_watch.py --limit NS=GIB ... [--total GIB] --out FILE

Reads the watch events kubectl prints (JSON objects one after another) and
keeps, per pod, the GPU memory it holds: the sum of its containers' limits
of aliyun.com/gpu-mem (GiB, the backend unit the e2e suite's configuration
rewrites to) while the pod is admitted (no scheduling gate), not being
deleted and not terminal (Succeeded/Failed). After each event it checks
each listed namespace against its limit and the listed namespaces together
against --total. A watch delivers the changes of one resource in
resourceVersion order, so this checks every state the API server went
through, not samples of it.

FILE ("-": standard output) gets one line per event: "EVENTS held-per-namespace... total", and a
line "OVER ..." for each event after which a limit was passed. The
process ends at end of input or on SIGTERM, after flushing FILE.
"""
import argparse
import json
import signal
import sys


def held_gib(pod):
    """GiB the pod holds now (0 when gated, deleting or terminal)."""
    meta, spec = pod.get("metadata", {}), pod.get("spec", {})
    if meta.get("deletionTimestamp") or spec.get("schedulingGates"):
        return 0
    if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    total = 0
    for c in spec.get("containers", []):
        v = ((c.get("resources") or {}).get("limits") or {}).get("aliyun.com/gpu-mem", "0")
        try:
            total += int(v)
        except ValueError:
            pass
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", action="append", default=[], help="NS=GIB")
    ap.add_argument("--total", type=int, default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    limits = {}
    for item in a.limit:
        ns, _, gib = item.partition("=")
        limits[ns] = int(gib)
    out = sys.stdout if a.out == "-" else open(a.out, "w", buffering=1)
    signal.signal(signal.SIGTERM, lambda *_: (out.flush(), sys.exit(0)))
    pods, n = {}, 0
    dec = json.JSONDecoder()
    buf = ""
    for chunk in iter(lambda: sys.stdin.readline(), ""):
        buf += chunk
        while True:
            s = buf.lstrip()
            if not s:
                buf = ""
                break
            try:
                ev, end = dec.raw_decode(s)
            except json.JSONDecodeError:
                buf = s
                break
            buf = s[end:]
            obj = ev.get("object", {})
            meta = obj.get("metadata", {})
            ns, uid = meta.get("namespace"), meta.get("uid")
            if ns not in limits or not uid:
                continue
            if ev.get("type") == "DELETED":
                pods.pop(uid, None)
            else:
                pods[uid] = (ns, held_gib(obj))
            n += 1
            per = {k: 0 for k in limits}
            for pns, gib in pods.values():
                per[pns] += gib
            total = sum(per.values())
            line = " ".join(str(per[k]) for k in sorted(limits))
            out.write(f"{n} {line} {total}\n")
            over = [f"{k}={per[k]}>{limits[k]}" for k in sorted(limits) if per[k] > limits[k]]
            if a.total is not None and total > a.total:
                over.append(f"total={total}>{a.total}")
            if over:
                out.write(f"OVER after {ev.get('type')} {ns}/{meta.get('name')}: {' '.join(over)}\n")
    out.close()


if __name__ == "__main__":
    main()
