#!/usr/bin/env python3
"""Check deploy/monitoring: the Grafana dashboard and the Prometheus rules.

  monitoring_check.py DASHBOARD RULES                 syntax and structure only
  monitoring_check.py DASHBOARD RULES SCRAPE...       and every metric and label
                                                      used, against /metrics answers

Structure: the dashboard is Grafana JSON with unique panel ids inside the
24-column grid, every panel query parses; the rules file is a PrometheusRule
whose spec is a valid rules file (groups with unique names, rules with a
unique alert name, expr, a duration in `for`, a severity, summary and
description, balanced templates) and every expr parses (test/promql.py).

Any install: the rules name no namespace of their own (applied with
`kubectl apply -n NS`), neither file names gpuquota-system, and no query
matches on a label that carries where or under what name gpuquota runs
(job, namespace of the scrape target, pod, service, ...) with a fixed value.

Against scrapes: every metric a query selects is a series some /metrics
answer exposes; every label it matches on, groups by or reads in a template
is a label of that metric (or instance/job, which Prometheus adds when it
scrapes); every label value matched with `=` was seen on that metric."""
import json
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promql  # noqa: E402

VARIABLES = {'$__rate_interval': '1m', '$namespace': '.*'}
TARGET_LABELS = {'instance', 'job'}  # added by Prometheus at scrape time
DURATION = re.compile(r'^(\d+(ms|s|m|h|d|w|y))+$')
SEVERITIES = {'critical', 'warning', 'info'}


def dashboard_queries(path, problems):
    with open(path, encoding='utf-8') as f:
        d = json.load(f)
    out, ids = [], set()

    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get('panels', []))

    for p in panels(d.get('panels', [])):
        pid = p.get('id')
        where = 'dashboard panel %s (%s)' % (pid, p.get('title'))
        if pid in ids:
            problems.append('%s: duplicate id' % where)
        ids.add(pid)
        g = p.get('gridPos', {})
        if not all(k in g for k in 'xywh') or g['x'] + g['w'] > 24:
            problems.append('%s: gridPos outside the 24-column grid' % where)
        if p.get('type') == 'row':
            continue
        targets = p.get('targets') or []
        if not targets:
            problems.append('%s: no query' % where)
        for t in targets:
            out.append((where, t.get('expr', ''), {}))
    for v in d.get('templating', {}).get('list', []):
        q = v.get('query')
        q = q.get('query') if isinstance(q, dict) else q
        if v.get('type') != 'query':
            continue
        m = re.fullmatch(r'label_values\(\s*(\w+)\s*,\s*(\w+)\s*\)', q or '')
        if not m:
            problems.append('dashboard variable %s: unsupported query %r' % (v.get('name'), q))
            continue
        out.append(('dashboard variable %s' % v.get('name'), m.group(1), {m.group(2)}))
    return out


def rule_queries(path, problems):
    with open(path, encoding='utf-8') as f:
        doc = yaml.safe_load(f)
    if doc.get('apiVersion') != 'monitoring.coreos.com/v1' or doc.get('kind') != 'PrometheusRule':
        problems.append('%s: not a monitoring.coreos.com/v1 PrometheusRule' % path)
    groups = (doc.get('spec') or {}).get('groups')
    if not isinstance(groups, list) or not groups:
        problems.append('%s: spec.groups must be a non-empty list' % path)
        return []
    out, gnames, anames = [], set(), set()
    for g in groups:
        gname = g.get('name')
        if not gname or gname in gnames:
            problems.append('rules: group name %r missing or duplicate' % gname)
        gnames.add(gname)
        unknown = set(g) - {'name', 'interval', 'rules', 'limit'}
        if unknown:
            problems.append('rules group %s: unknown keys %s' % (gname, sorted(unknown)))
        for r in g.get('rules') or []:
            name = r.get('alert') or r.get('record')
            where = 'rule %s' % name
            unknown = set(r) - {'alert', 'record', 'expr', 'for', 'keep_firing_for', 'labels',
                                'annotations'}
            if unknown:
                problems.append('%s: unknown keys %s' % (where, sorted(unknown)))
            if bool(r.get('alert')) == bool(r.get('record')):
                problems.append('%s: exactly one of alert and record' % where)
            if r.get('alert'):
                if not re.fullmatch(r'[A-Z][A-Za-z0-9]+', name) or name in anames:
                    problems.append('%s: alert names are unique CamelCase' % where)
                anames.add(name)
                if (r.get('labels') or {}).get('severity') not in SEVERITIES:
                    problems.append('%s: labels.severity must be one of %s' %
                                    (where, sorted(SEVERITIES)))
                ann = r.get('annotations') or {}
                for k in ('summary', 'description'):
                    if not ann.get(k):
                        problems.append('%s: annotations.%s missing' % (where, k))
                for k, v in ann.items():
                    if str(v).count('{{') != str(v).count('}}'):
                        problems.append('%s: annotations.%s: unbalanced {{ }}' % (where, k))
            if 'for' in r and not DURATION.match(str(r['for'])):
                problems.append('%s: for: %r is not a duration' % (where, r['for']))
            if not isinstance(r.get('expr'), str) or not r['expr'].strip():
                problems.append('%s: expr must be a string' % where)
                continue
            templ = set()
            for v in (r.get('annotations') or {}).values():
                templ |= set(re.findall(r'\$labels\.(\w+)', str(v)))
            out.append((where, r['expr'], templ))
    return out


# Labels a scrape configuration gives a target: their values are the
# install's names (its namespace, Service, pods), never fixed in a query.
INSTALL_LABELS = {'job', 'instance', 'pod', 'service', 'container', 'endpoint',
                  'kubernetes_namespace', 'kubernetes_pod_name', 'exported_namespace'}


def install_independent(paths, rules, trees, problems):
    for path in paths:
        with open(path, encoding='utf-8') as f:
            if 'gpuquota-system' in f.read():
                problems.append('%s: names the namespace gpuquota-system' % path)
    with open(rules, encoding='utf-8') as f:
        doc = yaml.safe_load(f)
    if 'namespace' in (doc.get('metadata') or {}):
        problems.append('%s: metadata.namespace fixes where the rules go' % rules)
    for where, expr, tree, templ in trees:
        for node in promql.walk(tree):
            if node[0] != 'sel':
                continue
            for lab, op, val in node[2]:
                if lab in INSTALL_LABELS and '$' not in val:
                    problems.append('%s: %s{%s%s%r} ties the query to one install' %
                                    (where, node[1], lab, op, val))


def parse_all(queries, problems):
    trees = []
    for where, expr, templ in queries:
        try:
            trees.append((where, expr, promql.parse(expr, VARIABLES), templ))
        except SyntaxError as e:
            problems.append('%s: %s' % (where, e))
    return trees


def load_scrapes(paths):
    labels, values = {}, {}
    for p in paths:
        with open(p, encoding='utf-8') as f:
            samples, _ = promql.parse_exposition(f.read())
        for name, lab, _ in samples:
            labels.setdefault(name, set()).update(lab)
            for k, v in lab.items():
                values.setdefault((name, k), set()).add(v)
    return labels, values


def output_labels(node, labels):
    """Labels the result of node may carry (for templates and groupings)."""
    kind = node[0]
    if kind == 'sel':
        return set(labels.get(node[1], set())) | TARGET_LABELS
    if kind == 'paren':
        return output_labels(node[1], labels)
    if kind == 'agg':
        inner = output_labels(node[3], labels)
        g = node[2]
        if g is None:
            return set()
        return set(g[1]) if g[0] == 'by' else inner - set(g[1])
    if kind == 'call':
        if node[1] == 'histogram_quantile':
            return output_labels(node[2][1], labels) - {'le'}
        if node[1] in ('vector', 'time'):
            return set()
        return output_labels(node[2][0], labels) if node[2] else set()
    if kind == 'bin':
        return output_labels(node[2], labels) | output_labels(node[3], labels)
    return set()


def check_against(trees, labels, values, problems):
    used = set()
    for where, expr, tree, templ in trees:
        for node in promql.walk(tree):
            if node[0] == 'sel':
                name = node[1]
                used.add(name)
                if name not in labels:
                    problems.append('%s: metric %s is not exposed by any /metrics' % (where, name))
                    continue
                for lab, op, val in node[2]:
                    if lab not in labels[name] and lab not in TARGET_LABELS:
                        problems.append('%s: %s has no label %s' % (where, name, lab))
                    elif op == '=' and '$' not in val and lab not in TARGET_LABELS and \
                            val not in values.get((name, lab), set()):
                        problems.append('%s: %s{%s} never has the value %r (seen: %s)' %
                                        (where, name, lab, val,
                                         sorted(values.get((name, lab), set()))))
            elif node[0] == 'bin' and node[4] is not None:
                for side in (node[2], node[3]):
                    have = output_labels(side, labels)
                    for lab in node[4][1]:
                        if lab not in have:
                            problems.append('%s: %s %s(%s): a side lacks that label' %
                                            (where, node[1], node[4][0], lab))
            elif node[0] == 'agg' and node[2] is not None:
                inner = output_labels(node[3], labels)
                for lab in node[2][1]:
                    if lab not in inner:
                        problems.append('%s: %s by/without %s, a label its argument lacks' %
                                        (where, node[1], lab))
        have = output_labels(tree, labels)
        for lab in templ:
            if lab not in have:
                problems.append('%s: the query result has no label %s' % (where, lab))
    return used


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    dashboard, rules, scrapes = argv[1], argv[2], argv[3:]
    problems = []
    queries = dashboard_queries(dashboard, problems) + rule_queries(rules, problems)
    plain = [(w, e, t) for w, e, t in queries if not w.startswith('dashboard variable')]
    trees = parse_all(plain, problems)
    install_independent([dashboard, rules], rules, trees, problems)
    used = set()
    if scrapes:
        labels, values = load_scrapes(scrapes)
        used = check_against(trees, labels, values, problems)
        for where, name, labs in queries:
            if where.startswith('dashboard variable'):
                used.add(name)
                if name not in labels:
                    problems.append('%s: metric %s is not exposed' % (where, name))
                for lab in labs - labels.get(name, set()):
                    problems.append('%s: %s has no label %s' % (where, name, lab))
    for p in problems:
        print('FAIL - ' + p)
    print('monitoring: %d queries, %d metrics checked against %d scrape(s), %d problem(s)' %
          (len(queries), len(used), len(scrapes), len(problems)))
    if not problems:
        print('monitoring: ok')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
