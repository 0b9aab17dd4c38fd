#!/usr/bin/env python3
"""Tables of scripts/bench-open.sh: one JSON line per open-loop run
(test/bench/podcreate run --arrival-rate, plus round, config, hard, load) in;
per rate, each configuration's latency from the scheduled time, the latency
gpuquota adds over ResourceQuota (native) and over its webhooks with nothing
to charge (W), and kube-apiserver CPU per create, out. Medians over rounds.
Nothing is asserted: the target (p99 added over W <= 5 ms at 50/s) is
printed beside the figure."""
import json
import statistics
import sys
from collections import defaultdict

NAMES = {"floor": "floor", "native": "native (ResourceQuota)",
         "hooks-3": "W (webhooks, nothing to charge, 3 replicas)",
         "gq-3": "gq (3 replicas, 2 controllers)",
         "gq-3e": "gq, escrow on (--escrow-pods 16)"}
QS = (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms"))
TARGET_RATE, TARGET_MS = 50, 5.0


def med(runs, f):
    return statistics.median(f(r) for r in runs)


def row(name, runs):
    lat = " ".join(f"{med(runs, lambda r, k=k: r[k]):8.1f}" for _, k in QS)
    cpu = med(runs, lambda r: r["cpu_s"].get("apiserver", 0) * 1000 / max(r["sent"], 1))
    rate = med(runs, lambda r: r["per_second"])
    bad = sum(r["errors"] + r["denied"] for r in runs)
    load = "/".join(f"{r['load']:.1f}" for r in runs)
    return f"  {name:46} {rate:6.1f} {lat} {cpu:9.2f} {bad:6d}  {load}"


def added(a, b, runs):
    """a's quantiles minus b's, medians over rounds."""
    if a not in runs or b not in runs:
        return None
    return [med(runs[a], lambda r, k=k: r[k]) - med(runs[b], lambda r, k=k: r[k]) for _, k in QS]


def main():
    by_rate = defaultdict(lambda: defaultdict(list))
    for line in open(sys.argv[1]):
        r = json.loads(line)
        by_rate[r["target_per_second"]][r["config"]].append(r)
    for rate in sorted(by_rate):
        runs = by_rate[rate]
        n = max(r["sent"] for rs in runs.values() for r in rs)
        print(f"== {rate:g} creates/s, {n} creates per run, latency from the scheduled time (ms)")
        print(f"  {'configuration':46} {'got/s':>6} {'p50':>8} {'p99':>8} {'p99.9':>8} "
              f"{'api ms/c':>9} {'!ok':>6}  load")
        for c in [c for c in NAMES if c in runs] + [c for c in runs if c not in NAMES]:
            print(row(NAMES.get(c, c), runs[c]))
        for a, b in (("gq-3", "native"), ("gq-3", "hooks-3"), ("gq-3e", "hooks-3"),
                     ("hooks-3", "native")):
            d = added(a, b, runs)
            if d is not None:
                print(f"  added, {a} over {b}: " + ", ".join(
                    f"{q} {v:+.1f} ms" for (q, _), v in zip(QS, d)))
        d = added("gq-3", "hooks-3", runs)
        if rate == TARGET_RATE and d is not None:
            print(f"  target at {TARGET_RATE}/s: p99 added over W <= {TARGET_MS:g} ms: "
                  f"{d[1]:+.1f} ms ({'within' if d[1] <= TARGET_MS else 'over'})")
        print()


if __name__ == "__main__":
    main()
