#!/usr/bin/env python3
"""Tables of scripts/bench-pods.sh: one JSON line per run (test/bench/podcreate
output plus round, config, layout, fit, hard) in, figures and ratios out.
Nothing is asserted; over-admission is printed for every run."""
import json
import statistics
import sys
from collections import defaultdict

NAMES = {
    "floor": "1 floor (no webhooks)",
    "native": "2 ResourceQuota",
    "gq": "3 gpuquota, 1 replica",
    "gq-tenant": "4 gpuquota tenant",
    "gq-3": "5 gpuquota, 3 replicas",
    "hooks": "W webhooks, no quota",
    "gq-t32": "3t as 3, --threads 32",
    "gq-b1": "3n as 3, --max-batch 1 (no group commit)",
    "gq-e": "3e as 3, --escrow-pods",
    "gq-3e": "5e as 5, --escrow-pods",
}
ORDER = list(NAMES)


def over_admitted(r):
    """Pods that exist beyond hard, and the pods the quota should admit."""
    ex = r["exist"]
    if r["config"] in ("floor", "hooks"):
        return None, r["sent"]
    if r["config"] == "gq-tenant":
        return max(0, sum(ex.values()) - r["hard"]), min(r["hard"], r["sent"])
    per_ns = r["sent"] // r["namespaces"]
    return (sum(max(0, v - r["hard"]) for v in ex.values()),
            r["namespaces"] * min(r["hard"], per_ns))


def conns(col):
    """Webhook connections per create, '-' where none ran or none were counted."""
    vals = [v for v in col if v >= 0]
    return f"{statistics.median(vals):.2f}" if vals else "-"


def spread(vals, fmt="{:.0f}"):
    """median, with min-max when there are several rounds."""
    if len(vals) == 1:
        return fmt.format(vals[0])
    return (fmt.format(statistics.median(vals)) + " (" + fmt.format(min(vals)) + "-" +
            fmt.format(max(vals)) + ")")


def per_create_ms(r, name):
    return 1000 * r["cpu_s"].get(name, 0) / r["sent"]


def ratio_cells(cell, base, configs):
    """creates/s and p99 of each configuration over base's (by round) in one cell."""
    row = []
    for c in configs:
        rs = [r for r in cell.get(c, []) if r["round"] in base]
        tp = [r["per_second"] / base[r["round"]]["per_second"] for r in rs]
        p99 = [r["p99_ms"] / base[r["round"]]["p99_ms"] for r in rs]
        row += [spread(tp, "{:.2f}") if tp else "-", spread(p99, "{:.1f}") if p99 else "-"]
    return row


def main(path):
    runs = [json.loads(l) for l in open(path) if l.strip()]
    cells = defaultdict(lambda: defaultdict(list))
    for r in runs:
        cells[(r["layout"], r["clients"], r["fit"])][r["config"]].append(r)
    rounds = max(r["round"] for r in runs)
    loads = [r["load"] for r in runs]
    print(f"{len(runs)} runs, {rounds} round(s); load average during runs "
          f"{min(loads):.1f}-{max(loads):.1f} (2 CPUs); "
          "per cell: median (min-max) over rounds")
    print()
    hdr = ("| cell | configuration | creates/s | p50 ms | p99 ms | p99.9 ms | admitted/expected "
           "| over-admitted | apiserver ms CPU/create | etcd | kcm | webhooks | controllers |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    worst_over = 0
    for key in sorted(cells, key=lambda k: (k[2] == "fit", k[1], k[0])):
        layout, clients, fit = key
        for c in ORDER:
            rs = cells[key].get(c)
            if not rs:
                continue
            overs, adm = [], []
            for r in rs:
                o, exp = over_admitted(r)
                overs.append(o)
                adm.append(f"{r['admitted']}/{exp}" + (f" ({r['errors']} err)" if r["errors"] else ""))
                if o:
                    worst_over = max(worst_over, o)
            over = "n/a" if overs[0] is None else ",".join(str(o) for o in overs)
            print(f"| {layout} {clients}c {fit} | {NAMES[c]} "
                  f"| {spread([r['per_second'] for r in rs])} "
                  f"| {spread([r['p50_ms'] for r in rs])} "
                  f"| {spread([r['p99_ms'] for r in rs])} "
                  f"| {spread([r['p999_ms'] for r in rs])} "
                  f"| {', '.join(sorted(set(adm)))} | {over} "
                  f"| {spread([per_create_ms(r, 'apiserver') for r in rs], '{:.2f}')} "
                  f"| {spread([per_create_ms(r, 'etcd') for r in rs], '{:.2f}')} "
                  f"| {spread([per_create_ms(r, 'kcm') for r in rs], '{:.2f}')} "
                  f"| {spread([per_create_ms(r, 'webhook') for r in rs], '{:.2f}')} "
                  f"| {spread([per_create_ms(r, 'controller') for r in rs], '{:.2f}')} |")
    print()
    print("Ratios to ResourceQuota (2), same cell, same round; median (min-max) over rounds.")
    print("Throughput: >= 1.0 means at least as fast; p99: <= 1.0 means no slower.")
    print()
    ratios = tuple(c for c in ("gq", "gq-tenant", "gq-3", "gq-b1", "gq-t32", "gq-e", "gq-3e", "hooks")
                   if any(c in cell for cell in cells.values()))
    print("| cell | " + " | ".join(f"{NAMES[c].split()[0]}/2 creates/s | {NAMES[c].split()[0]}/2 p99"
                                   for c in ratios) + " | apiserver CPU/create 3/2 |")
    print("|---" * (2 * len(ratios) + 2) + "|")
    for key in sorted(cells, key=lambda k: (k[2] == "fit", k[1], k[0])):
        nat = {r["round"]: r for r in cells[key].get("native", [])}
        row = [f"{key[0]} {key[1]}c {key[2]}"] + ratio_cells(cells[key], nat, ratios)
        cpu = [per_create_ms(r, "apiserver") / per_create_ms(nat[r["round"]], "apiserver")
               for r in cells[key].get("gq", []) if r["round"] in nat]
        row.append(spread(cpu, "{:.1f}") if cpu else "-")
        print("| " + " | ".join(row) + " |")
    print()
    print("Ratios to W (webhooks called, no quota; issue 27's floor), same cell, same round:")
    print("creates/s (>= 0.9 is the target) and p99 (<= 1.2).")
    print()
    vs_w = tuple(c for c in ratios if c != "hooks")
    print("| cell | " + " | ".join(f"{NAMES[c].split()[0]}/W creates/s | {NAMES[c].split()[0]}/W p99"
                                   for c in vs_w) + " |")
    print("|---" * (2 * len(vs_w) + 1) + "|")
    for key in sorted(cells, key=lambda k: (k[2] == "fit", k[1], k[0])):
        w = {r["round"]: r for r in cells[key].get("hooks", [])}
        row = [f"{key[0]} {key[1]}c {key[2]}"] + ratio_cells(cells[key], w, vs_w)
        print("| " + " | ".join(row) + " |")
    print()
    print("What kube-apiserver served per create (its apiserver_request_total): status writes")
    print("of the quota objects by the admission side (gpuquota's webhook; for ResourceQuota")
    print("kube-apiserver's own quota admission, with kube-controller-manager's writes: 'both')")
    print("and by gpuquota's controller, and conflicts; the mean webhook call it saw")
    print("(apiserver_admission_webhook_admission_duration_seconds); the largest GPUQuota or")
    print("GPUTenantQuota status written during the run; the connections the webhook")
    print("replicas accepted (each a TLS handshake). Medians over rounds.")
    print()
    print("| cell | configuration | quota status writes per create: admission / controller / 409 "
          "| quota GET per create "
          "| /mutate mean ms | /validate mean ms | largest status: reservations, KB "
          "| webhook connections per create |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(cells, key=lambda k: (k[2] == "fit", k[1], k[0])):
        for c in ("native", "hooks", "gq", "gq-tenant", "gq-3", "gq-b1", "gq-t32", "gq-e", "gq-3e"):
            rs = cells[key].get(c, [])
            if not rs:
                continue
            m = statistics.median
            rows = []
            for r in rs:
                req = r.get("apiserver_requests") or {}
                wh = r.get("webhooks") or {}
                n = r["sent"]
                # (ResourceQuota: written by kube-apiserver's own quota admission
                # and by kube-controller-manager, both in this count)
                ok = sum(v for k, v in req.items()
                         if k.startswith(("PUT gpu", "PUT resourcequotas")) and "/status 200" in k)
                rows.append((
                    (ok - r.get("controller_writes", 0)) / n,
                    r.get("controller_writes", 0) / n,
                    sum(v for k, v in req.items()
                        if k.startswith(("PUT gpu", "PUT resourcequotas")) and "/status 409" in k) / n,
                    sum(v for k, v in req.items() if k.startswith("GET gpu")) / n,
                    wh.get("mutate.gpuquota.io", {}).get("mean_ms", 0),
                    wh.get("validate.gpuquota.io", {}).get("mean_ms", 0),
                    r.get("quota_max_reservations", 0),
                    r.get("quota_max_bytes", 0) / 1024,
                    r.get("webhook_connections", -1) / n))
            col = list(zip(*rows))
            split = c != "native" and all("controller_writes" in r for r in rs)
            writes = (f"{m(col[0]):.2f} / {m(col[1]):.2f}" if split
                      else f"{m(col[0]):.2f} (both) / -")
            print(f"| {key[0]} {key[1]}c {key[2]} | {NAMES[c]} "
                  f"| {writes} / {m(col[2]):.2f} | {m(col[3]):.2f} "
                  f"| {m(col[4]):.0f} | {m(col[5]):.0f} | {m(col[6]):.0f}, {m(col[7]):.0f} "
                  f"| {conns(col[8])} |")
    print()
    errs = [r for r in runs if r["errors"]]
    for r in errs:
        print(f"run {r['run']}: {r['errors']} errors, first: {r.get('first_error')}")
    print(f"over-admission: {'none in any run' if worst_over == 0 else f'UP TO {worst_over} PODS'}")


if __name__ == "__main__":
    main(sys.argv[1])
