#!/usr/bin/env python3
"""Alerting rules evaluated on made-up series, as promtool's rule unit tests
do (promtool itself is not built: docs/monitoring.md): each case gives the
series over time and says whether the alert's expression holds at the end,
and with which labels. Uses the PromQL subset of test/promql.py.

  alert_rules_check.py RULES"""
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promql  # noqa: E402

STEP = 60  # seconds between samples, as a 1m scrape interval
END = 3600


def rule_expr(rules, name):
    for g in rules['spec']['groups']:
        for r in g['rules']:
            if r.get('alert') == name:
                return r['expr']
    raise SystemExit('no alert %s' % name)


def store_of(series):
    """series: [(name, labels, fn(t) -> value or None)] sampled every STEP."""
    s = promql.Store()
    for name, labels, fn in series:
        for t in range(0, END + 1, STEP):
            v = fn(t)
            if v is not None:
                s.add(t, name, labels, float(v))
    return s


LEADER = ('gpuquota_controller_leader', {'instance': 'c1'}, lambda t: 1)
FOLLOWER = ('gpuquota_controller_leader', {'instance': 'c2'}, lambda t: 0)


def quota(ns, name, reclaimed_per_min, queue):
    """The leader's series of one quota: victims reclaimed so far (a
    counter growing by reclaimed_per_min), and its queue length at t."""
    lab = {'instance': 'c1', 'namespace': ns, 'quota': name}
    return [
        ('gpuquota_preemption_victims_total', dict(lab, reason='Reclaim'),
         lambda t: reclaimed_per_min * (t // 60)),
        ('gpuquota_preemption_victims_total', dict(lab, reason='WithinQuota'), lambda t: 0),
        ('gpuquota_queue_length', lab, queue),
    ]


# (what, series, labels of the quotas the expression must hold for)
STARVED = [
    ('reclaimed every minute, queue steady: starved',
     [LEADER, FOLLOWER] + quota('team-a', 'q', 1, lambda t: 4), [('team-a', 'q')]),
    ('reclaimed, queue growing: starved',
     [LEADER] + quota('team-a', 'q', 1, lambda t: 2 + t // 600), [('team-a', 'q')]),
    ('reclaimed, but the queue drains: not starved',
     [LEADER] + quota('team-a', 'q', 1, lambda t: 40 - t // 120), []),
    ('queued but never reclaimed: not starved (GPUQuotaQueueWaiting says it)',
     [LEADER] + quota('team-a', 'q', 0, lambda t: 4), []),
    ('two reclaims in 15 min: not yet',
     [LEADER] + quota('team-a', 'q', 0, lambda t: 4)
     + [('gpuquota_preemption_victims_total',
         {'instance': 'c1', 'namespace': 'team-b', 'quota': 'q', 'reason': 'Reclaim'},
         lambda t: 0 if t < END - 600 else 2)], []),
    ('reclaimed with an empty queue: not starved',
     [LEADER] + quota('team-a', 'q', 1, lambda t: 0), []),
    ('one quota starved among two',
     [LEADER] + quota('team-a', 'q', 1, lambda t: 3) + quota('team-b', 'q', 0, lambda t: 3),
     [('team-a', 'q')]),
    ('a follower\'s stale counters do not count',
     [FOLLOWER] + [(n, dict(l, instance='c2'), f) for n, l, f in
                   quota('team-a', 'q', 1, lambda t: 4)], []),
]


def main():
    with open(sys.argv[1], encoding='utf-8') as f:
        rules = yaml.safe_load(f)
    expr = promql.parse(rule_expr(rules, 'GPUQuotaStarvedByReclaim'))
    problems = 0
    for what, series, want in STARVED:
        got = sorted((l.get('namespace'), l.get('quota'))
                     for l, _ in promql.evaluate(expr, store_of(series), END))
        if got != sorted(want):
            print('FAIL GPUQuotaStarvedByReclaim, %s: holds for %s, want %s' % (what, got, want))
            problems += 1
    print('alert rules: %d case(s), %d problem(s)' % (len(STARVED), problems))
    if problems:
        sys.exit(1)
    print('alert rules: ok')


if __name__ == '__main__':
    main()
