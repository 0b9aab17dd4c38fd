#!/usr/bin/env python3
"""Draw the panels of gpuquota's Grafana dashboard as one PNG, from /metrics
samples, with the dashboard's own queries (evaluated by test/promql.py), laid
out on the dashboard's grid. Grafana is not needed.

  dashboard_png.py DASHBOARD.json SAMPLES-DIR OUT.png

SAMPLES-DIR holds one folder per scrape round, named by its Unix time, each
with the /metrics answers of that round (NAME.prom; NAME becomes the
instance label, and the job is gpuquota-webhook or gpuquota-controller by
its prefix), as test/e2e/t_monitoring.sh leaves them. Needs matplotlib
(Debian: python3-matplotlib)."""
import json
import math
import os
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test'))
import promql  # noqa: E402

ROW_H = 0.42  # inches per grid row
COL_W = 0.78  # inches per grid column


def load(samples_dir):
    store, times = promql.Store(), []
    for d in sorted(os.listdir(samples_dir)):
        path = os.path.join(samples_dir, d)
        try:
            t = float(d)
        except ValueError:
            continue
        if not os.path.isdir(path):
            continue
        times.append(t)
        for f in sorted(os.listdir(path)):
            if not f.endswith('.prom'):
                continue
            inst = f[:-5]
            job = 'gpuquota-controller' if inst.startswith('controller') else 'gpuquota-webhook'
            with open(os.path.join(path, f), encoding='utf-8') as fh:
                samples, _ = promql.parse_exposition(fh.read())
            for name, labels, value in samples:
                labels = dict(labels, instance=inst, job=job)
                store.add(t, name, labels, value)
    return store, times


def legend(fmt, labels):
    out = fmt or ''
    for k, v in labels.items():
        out = out.replace('{{%s}}' % k, v)
    while '{{' in out:
        a = out.index('{{')
        b = out.find('}}', a)
        out = out[:a] + out[b + 2:] if b > 0 else out[:a]
    return out.strip() or ','.join('%s=%s' % kv for kv in sorted(labels.items())) or 'value'


def scale(unit, values):
    """Values in a readable unit, and the axis label."""
    finite = [abs(v) for v in values if not math.isnan(v) and not math.isinf(v)]
    top = max(finite) if finite else 0
    if unit == 'bytes':
        return [v / 2**30 for v in values], 'GiB'
    if unit == 's':
        if top and top < 1:
            return [v * 1000 for v in values], 'ms'
        if top > 86400 * 2:
            return [v / 86400 for v in values], 'days'
        return values, 's'
    if unit == 'percentunit':
        return [v * 100 for v in values], '%'
    return values, {'percent': '%', 'reqps': 'req/s', 'ops': 'ops/s'}.get(unit, '')


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    with open(argv[1], encoding='utf-8') as f:
        dash = json.load(f)
    store, times = load(argv[2])
    if len(times) < 2:
        print('need at least two scrape rounds in %s' % argv[2])
        return 1
    step = (times[-1] - times[0]) / (len(times) - 1)
    # Rates over four scrape intervals, as Grafana's $__rate_interval does.
    window = '%ds' % max(2, int(math.ceil(step * 4)))
    variables = {'$__rate_interval': window, '$namespace': '.*'}
    panels = dash['panels']
    rows = max(p['gridPos']['y'] + p['gridPos']['h'] for p in panels)
    fig = plt.figure(figsize=(24 * COL_W, rows * ROW_H + 0.6))
    fig.suptitle('%s  (samples: %d scrape rounds, %.0f s, rates over %s)' %
                 (dash['title'], len(times), times[-1] - times[0], window), fontsize=13)
    top_pad = 0.6 / (rows * ROW_H + 0.6)
    rel = [t - times[0] for t in times]
    for p in panels:
        g = p['gridPos']
        x0, w = g['x'] / 24, g['w'] / 24
        y0 = 1 - top_pad - (g['y'] + g['h']) / rows * (1 - top_pad)
        h = g['h'] / rows * (1 - top_pad)
        if p['type'] == 'row':
            fig.text(x0 + 0.005, y0 + h * 0.2, p['title'], fontsize=12, weight='bold')
            continue
        ax = fig.add_axes([x0 + 0.03 * w + 0.012, y0 + 0.16 * h, w * 0.94 - 0.02, h * 0.70])
        ax.set_title(p['title'], fontsize=10, loc='left')
        unit = p.get('fieldConfig', {}).get('defaults', {}).get('unit', '')
        if p['type'] == 'stat':
            tree = promql.parse(p['targets'][0]['expr'], variables)
            res = promql.evaluate(tree, store, times[-1], variables)
            v = res if isinstance(res, float) else (res[0][1] if res else float('nan'))
            vals, u = scale(unit, [v])
            ax.axis('off')
            ax.text(0.5, 0.45, 'no data' if math.isnan(vals[0]) else '%.4g %s' % (vals[0], u),
                    ha='center', va='center', fontsize=22, transform=ax.transAxes)
            continue
        lines = {}
        for tgt in p['targets']:
            tree = promql.parse(tgt['expr'], variables)
            for t in times:
                res = promql.evaluate(tree, store, t, variables)
                if isinstance(res, float):
                    res = [({}, res)]
                for labels, v in res:
                    name = legend(tgt.get('legendFormat'), labels)
                    lines.setdefault(name, {})[t] = v
        axis = ''
        for name, pts in sorted(lines.items()):
            ys = [pts.get(t, float('nan')) for t in times]
            ys, axis = scale(unit, ys)
            ax.plot(rel, ys, label=name, linewidth=1.6, marker='o', markersize=2.5)
        ax.set_ylabel(axis, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if lines:
            ax.legend(fontsize=7, loc='upper left', frameon=False)
        else:
            ax.text(0.5, 0.5, 'no data', ha='center', va='center', transform=ax.transAxes)
        ax.set_xlim(0, rel[-1])
        ax.set_xlabel('seconds', fontsize=7)
    fig.savefig(argv[3], dpi=80)
    print('wrote %s' % argv[3])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
