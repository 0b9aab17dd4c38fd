"""A small PromQL parser and evaluator: the subset gpuquota's dashboard and
alerting rules use (selectors with matchers, ranges and offsets, rate, increase,
histogram_quantile, absent, vector, time, sum/min/max/avg/count by|without,
arithmetic, comparisons, and/or/unless). It lets the tests check every metric
and label a query uses against real /metrics scrapes, and lets
scripts/dashboard_png.py draw the panels from scraped samples with the very
queries of the dashboard. Anything outside the subset is a SyntaxError, so a
query that is not understood fails the test instead of passing unchecked."""
import math
import re

FUNCS = {'rate', 'increase', 'histogram_quantile', 'absent', 'vector', 'time', 'clamp_min'}
AGGS = {'sum', 'min', 'max', 'avg', 'count'}
KEYWORDS = {'by', 'without', 'offset', 'bool', 'on', 'ignoring'}
DUR = re.compile(r'^(\d+)(ms|s|m|h|d|w)$')
UNITS = {'ms': 0.001, 's': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}

TOKEN = re.compile(r'''
    (?P<ws>\s+)
  | (?P<num>\d+(?:\.\d+)?(?:e[+-]?\d+)?)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<range>\[[^\]]*\])
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/(){},<>=^%])
  | (?P<id>[A-Za-z_:][A-Za-z0-9_:]*)
''', re.X)


class SyntaxError_(SyntaxError):
    pass


def tokenize(text):
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise SyntaxError_('unexpected %r at %d in %s' % (text[pos:pos + 10], pos, text))
        pos = m.end()
        kind = m.lastgroup
        if kind != 'ws':
            out.append((kind, m.group()))
    return out


def duration(text, variables):
    text = variables.get(text, text)
    m = DUR.match(text)
    if not m:
        raise SyntaxError_('bad duration %r' % text)
    return int(m.group(1)) * UNITS[m.group(2)]


class Parser:
    # binary operators by precedence, lowest first
    LEVELS = [('or',), ('and', 'unless'), ('==', '!=', '>', '<', '>=', '<='), ('+', '-'),
              ('*', '/', '%')]

    def __init__(self, text, variables=None):
        self.toks = tokenize(text)
        self.i = 0
        self.vars = variables or {}

    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else (None, None)

    def take(self, value=None, kind=None):
        t = self.peek()
        if (value is not None and t[1] != value) or (kind is not None and t[0] != kind):
            raise SyntaxError_('expected %s, found %r' % (value or kind, t[1]))
        self.i += 1
        return t

    def parse(self):
        e = self.binary(0)
        if self.i != len(self.toks):
            raise SyntaxError_('trailing %r' % (self.peek()[1],))
        return e

    def binary(self, level):
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[1] in self.LEVELS[level]:
            op = self.take()[1]
            matching = None
            if self.peek()[1] in ('on', 'ignoring'):
                matching = (self.take()[1], self.labels())
            right = self.binary(level + 1)
            left = ('bin', op, left, right, matching)
        return left

    def unary(self):
        if self.peek()[1] == '-':
            self.take()
            return ('bin', '*', ('num', -1.0), self.unary(), None)
        return self.primary()

    def labels(self):
        self.take('(')
        out = []
        while self.peek()[1] != ')':
            out.append(self.take(kind='id')[1])
            if self.peek()[1] == ',':
                self.take()
        self.take(')')
        return out

    def primary(self):
        kind, val = self.peek()
        if kind == 'num':
            self.take()
            return ('num', float(val))
        if val == '(':
            self.take()
            e = self.binary(0)
            self.take(')')
            return ('paren', e)
        if kind != 'id':
            raise SyntaxError_('unexpected %r' % (val,))
        if val in AGGS:
            self.take()
            grouping = None
            if self.peek()[1] in ('by', 'without'):
                grouping = (self.take()[1], self.labels())
            self.take('(')
            arg = self.binary(0)
            self.take(')')
            if grouping is None and self.peek()[1] in ('by', 'without'):
                grouping = (self.take()[1], self.labels())
            return ('agg', val, grouping, arg)
        if val in FUNCS:
            self.take()
            self.take('(')
            args = []
            while self.peek()[1] != ')':
                args.append(self.binary(0))
                if self.peek()[1] == ',':
                    self.take()
            self.take(')')
            return ('call', val, args)
        if val in KEYWORDS or val in ('and', 'or', 'unless'):
            raise SyntaxError_('unexpected keyword %r' % val)
        self.take()
        if self.peek()[1] == '(':
            raise SyntaxError_('unknown function %r' % val)
        matchers = []
        if self.peek()[1] == '{':
            self.take()
            while self.peek()[1] != '}':
                name = self.take(kind='id')[1]
                op = self.take(kind='op')[1]
                if op not in ('=', '!=', '=~', '!~'):
                    raise SyntaxError_('bad matcher operator %r' % op)
                s = self.take(kind='str')[1]
                matchers.append((name, op, bytes(s[1:-1], 'utf-8').decode('unicode_escape')))
                if self.peek()[1] == ',':
                    self.take()
            self.take('}')
        rng = None
        if self.peek()[0] == 'range':
            rng = duration(self.take()[1][1:-1].strip(), self.vars)
        off = 0
        if self.peek()[1] == 'offset':
            self.take()
            num = self.take(kind='num')[1]
            off = duration(num + self.take(kind='id')[1], self.vars)
        return ('sel', val, matchers, rng, off)


def parse(text, variables=None):
    return Parser(text, variables).parse()


def walk(node):
    """Every node of the tree, depth first."""
    yield node
    if node[0] == 'bin':
        yield from walk(node[2])
        yield from walk(node[3])
    elif node[0] == 'paren':
        yield from walk(node[1])
    elif node[0] == 'agg':
        yield from walk(node[3])
    elif node[0] == 'call':
        for a in node[2]:
            yield from walk(a)


# ---- evaluation ------------------------------------------------------------

def matches(labels, matchers, variables):
    for name, op, value in matchers:
        for k, v in variables.items():
            value = value.replace(k, v)
        have = labels.get(name, '')
        if op == '=' and have != value:
            return False
        if op == '!=' and have == value:
            return False
        if op == '=~' and not re.fullmatch(value, have):
            return False
        if op == '!~' and re.fullmatch(value, have):
            return False
    return True


class Store:
    """Samples: series key (name, sorted label tuple) -> [(t, value)]."""

    def __init__(self):
        self.series = {}

    def add(self, t, name, labels, value):
        key = (name, tuple(sorted(labels.items())))
        self.series.setdefault(key, []).append((t, value))


def key_of(labels):
    return tuple(sorted(labels.items()))


def evaluate(node, store, t, variables=None, lookback=300):
    """Instant value at time t: a float (scalar) or a list of (labels, value)."""
    variables = variables or {}
    kind = node[0]
    if kind == 'num':
        return node[1]
    if kind == 'paren':
        return evaluate(node[1], store, t, variables, lookback)
    if kind == 'sel':
        _, name, matchers, rng, off = node
        t -= off
        out = []
        for (n, lab), samples in store.series.items():
            labels = dict(lab)
            if n != name or not matches(labels, matchers, variables):
                continue
            if rng is None:
                past = [s for s in samples if t - lookback < s[0] <= t]
                if past:
                    out.append((labels, past[-1][1]))
            else:
                out.append((labels, [s for s in samples if t - rng < s[0] <= t]))
        return out
    if kind == 'call':
        fn, args = node[1], node[2]
        if fn == 'time':
            return float(t)
        if fn == 'vector':
            return [({}, evaluate(args[0], store, t, variables, lookback))]
        if fn in ('rate', 'increase'):
            out = []
            for labels, samples in evaluate(args[0], store, t, variables, lookback):
                if len(samples) < 2:
                    continue
                inc, prev = 0.0, samples[0][1]
                for _, v in samples[1:]:
                    inc += v - prev if v >= prev else v  # counter reset
                    prev = v
                span = samples[-1][0] - samples[0][0]
                rate = inc / span if span > 0 else 0.0
                out.append(({k: v for k, v in labels.items()}, rate if fn == 'rate' else inc))
            return out
        if fn == 'absent':
            return [] if evaluate(args[0], store, t, variables, lookback) else [({}, 1.0)]
        if fn == 'clamp_min':
            lo = evaluate(args[1], store, t, variables, lookback)
            return [(l, max(v, lo)) for l, v in evaluate(args[0], store, t, variables, lookback)]
        if fn == 'histogram_quantile':
            q = evaluate(args[0], store, t, variables, lookback)
            groups = {}
            for labels, v in evaluate(args[1], store, t, variables, lookback):
                rest = {k: x for k, x in labels.items() if k != 'le'}
                le = float('inf') if labels['le'] == '+Inf' else float(labels['le'])
                groups.setdefault(key_of(rest), []).append((le, v))
            out = []
            for k, buckets in groups.items():
                buckets.sort()
                total = buckets[-1][1]
                if total <= 0:
                    continue
                rank, prev_le, prev_c = q * total, 0.0, 0.0
                for le, c in buckets:
                    if c >= rank:
                        if math.isinf(le):
                            val = prev_le
                        else:
                            val = prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c)
                                                              if c > prev_c else 0)
                        out.append((dict(k), val))
                        break
                    prev_le, prev_c = le, c
            return out
    if kind == 'agg':
        _, op, grouping, arg = node
        groups = {}
        for labels, v in evaluate(arg, store, t, variables, lookback):
            if grouping is None:
                g = {}
            elif grouping[0] == 'by':
                g = {k: labels[k] for k in grouping[1] if k in labels}
            else:
                g = {k: x for k, x in labels.items() if k not in grouping[1] and k != '__name__'}
            groups.setdefault(key_of(g), []).append(v)
        f = {'sum': sum, 'min': min, 'max': max, 'count': len,
             'avg': lambda xs: sum(xs) / len(xs)}[op]
        return [(dict(k), float(f(vs))) for k, vs in groups.items()]
    if kind == 'bin':
        _, op, ln, rn, matching = node
        lv = evaluate(ln, store, t, variables, lookback)
        rv = evaluate(rn, store, t, variables, lookback)

        def mkey(labels):
            if matching is None:
                return key_of(labels)
            if matching[0] == 'on':
                return key_of({k: labels.get(k, '') for k in matching[1]})
            return key_of({k: v for k, v in labels.items() if k not in matching[1]})

        if op in ('and', 'or', 'unless'):
            rkeys = {mkey(l) for l, _ in rv}
            if op == 'and':
                return [(l, v) for l, v in lv if mkey(l) in rkeys]
            if op == 'unless':
                return [(l, v) for l, v in lv if mkey(l) not in rkeys]
            lkeys = {mkey(l) for l, _ in lv}
            return lv + [(l, v) for l, v in rv if mkey(l) not in lkeys]
        if isinstance(lv, float) and isinstance(rv, float):
            r = apply(op, lv, rv)
            return r if r is not None else float('nan')
        if isinstance(rv, float):
            return [(l, v if op in CMP else r) for l, v in lv
                    for r in [apply(op, v, rv)] if r is not None]
        if isinstance(lv, float):
            return [(l, v if op in CMP else r) for l, v in rv
                    for r in [apply(op, lv, v)] if r is not None]
        right = {mkey(l): v for l, v in rv}
        out = []
        for l, v in lv:
            k = mkey(l)
            if k in right:
                r = apply(op, v, right[k])
                if r is not None:
                    out.append((l, v if op in CMP else r))
        return out
    raise SyntaxError_('cannot evaluate %r' % (kind,))


CMP = ('==', '!=', '>', '<', '>=', '<=')


def apply(op, a, b):
    """a op b; None when a comparison filters the element out."""
    if op in CMP:
        ok = {'==': a == b, '!=': a != b, '>': a > b, '<': a < b, '>=': a >= b, '<=': a <= b}[op]
        return a if ok else None
    if op == '/':
        return a / b if b else (float('inf') if a > 0 else float('nan'))
    if op == '%':
        return math.fmod(a, b) if b else float('nan')
    if op == '+':
        return a + b
    if op == '-':
        return a - b
    if op == '*':
        return a * b
    try:
        return a ** b
    except OverflowError:
        return float('inf')


# ---- the Prometheus text format --------------------------------------------

SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def parse_exposition(text):
    """[(name, labels, value)] and {family: type} of a /metrics answer."""
    samples, types = [], {}
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            _, _, name, typ = line.split(None, 3)
            types[name] = typ
            continue
        if not line.strip() or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError('bad exposition line: %r' % line)
        labels, body, pos = {}, m.group(2) or '', 0
        while pos < len(body):
            lm = LABEL.match(body, pos)
            if not lm:
                raise ValueError('bad labels: %r' % line)
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        samples.append((m.group(1), labels, float(m.group(3).replace('+Inf', 'inf'))))
    return samples, types
