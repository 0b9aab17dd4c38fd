#!/usr/bin/env python3
"""Where kube-apiserver's CPU goes per pod create (or per pod op of a churn),
from CPU profiles taken during scripts/bench-pods.sh runs
(GQ_BENCH_PROFILE=1).

    apiserver-profile.py [--per op] LABEL=TOP_FILE=MS_PER_OP ...

TOP_FILE is `go tool pprof -top -cum -nodecount=100000` of one profile;
MS_PER_OP is kube-apiserver's CPU per create (per create or delete) over the
whole run the profile was taken in. Each part's share of the profile's
samples is printed as milliseconds of CPU per op (share x MS_PER_OP). Parts are named by
the frame whose cumulative time they are, read in k8s.io/apiserver v1.34;
parts nest (indented) and do not add up to the total: the request filters
(authentication, priority and fairness, audit) are in none of them. Figures
only; nothing is asserted."""
import re
import sys

# (label, frames whose cumulative times add up to the part)
PARTS = [
    ("pod create handler (decode, admission, storage)",
     ["handlers.CreateResource.createHandler.func1.2"]),
    ("  mutating webhooks, in all", ["webhook/mutating.(*Plugin).Admit"]),
    ("    call /mutate, apply its JSON patch",
     ["mutating.(*mutatingDispatcher).callAttrMutatingHook"]),
    ("  validating webhooks, in all",
     ["validating.(*validatingDispatcher).Dispatch", "validating.(*validatingDispatcher).Dispatch.func1"]),
    ("  matchConditions of both (CEL; in the two above)", ["matchconditions.(*matcher).Match"]),
    ("  ResourceQuota admission (evaluator)", ["resourcequota.(*quotaEvaluator).doWork"]),
    ("  pod written to etcd", ["registry.(*Store).Create"]),
    ("pod delete handler", ["handlers.DeleteResource.func1.1"]),
    ("custom resource status writes", ["customresource.(*StatusREST).Update"]),
    ("custom resource GETs", ["crdHandler).serveResource.GetResource.func1"]),
    ("ResourceQuota status writes", ["resourcequota/storage.(*StatusREST).Update"]),
    ("watch events sent", ["handlers.(*WatchServer).HandleHTTP"]),
    ("garbage collection", ["runtime.gcBgMarkWorker", "runtime.gcAssistAlloc"]),
]


def seconds(text):
    m = re.fullmatch(r"([0-9.]+)(ms|s|us|µs|ns)", text)
    if not m:
        return None
    scale = {"s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}[m.group(2)]
    return float(m.group(1)) * scale


def load(path):
    """(total sampled seconds, {frame: cumulative seconds})."""
    total, cum = None, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.search(r"Total samples = (\S+)", line)
            if m:
                total = seconds(m.group(1))
                continue
            p = line.split()
            if len(p) >= 6 and seconds(p[3]) is not None and p[4].endswith("%"):
                frame = " ".join(p[5:])
                cum[frame] = max(cum.get(frame, 0.0), seconds(p[3]))
    if not total:
        raise SystemExit(f"{path}: no 'Total samples' line: not a pprof -top listing")
    return total, cum


def part_seconds(cum, frames):
    """The cumulative time of each frame, added: a frame is the one listed
    line that ends with it (a goroutine's frames are not under its caller)."""
    return sum(max([v for k, v in cum.items() if k.endswith(f)] or [0.0]) for f in frames)


def main(args):
    per = "create"
    if args[:1] == ["--per"] and len(args) > 1:
        per, args = args[1], args[2:]
    if not args:
        raise SystemExit(__doc__)
    cols = []
    for a in args:
        label, path, ms = a.split("=", 2)
        total, cum = load(path)
        cols.append((label, total, cum, float(ms)))
    width = max(len(p[0]) for p in PARTS) + 2
    print(f"kube-apiserver CPU per {per}, ms (share of its samples)")
    print("".ljust(width) + "".join(c[0].rjust(16) for c in cols))
    print("all of it".ljust(width) + "".join(f"{c[3]:9.2f} (100%)".rjust(16) for c in cols))
    for label, frames in PARTS:
        row = []
        for _, total, cum, ms in cols:
            share = part_seconds(cum, frames) / total
            row.append(f"{share * ms:6.2f} ({100 * share:3.0f}%)".rjust(16))
        print(label.ljust(width) + "".join(row))


if __name__ == "__main__":
    main(sys.argv[1:])
