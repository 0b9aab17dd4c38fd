#!/usr/bin/env python3
"""Figures of the product's C code (test/ excluded): function lengths,
parameter counts and include cycles between source files.

Functions are found the way clang-format lays them out in this tree: a
definition's body opens with `{` alone in column 0 and closes with `}` alone
in column 0; its signature is the text from the end of the previous
top-level item. Length counts the lines from the signature's first line to
the closing brace, as an editor shows them.

Usage: test/code_stats.py [ROOT] [--list N] [--max NAME=N,...]
  --list N   print the N longest functions and every one over 7 parameters
  --max      a ratchet: exit 1 when a figure is above its bound (names:
             over60, over100, params, cycles). ctest code_stats holds the
             figures of the tree to what they are: all 0 now, so a function
             over 60 lines or 7 parameters, or an include cycle, fails it.
Callbacks whose parameters a library fixes are not counted against the
parameter bound (FIXED_SIGNATURES, each with the type that fixes it).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import strip  # noqa: E402  comments and literals blanked, lines kept

# FILE: {function: the library type that fixes its parameters}.
FIXED_SIGNATURES = {
    "http/server.c": {
        "access_handler": "libmicrohttpd's MHD_AccessHandlerCallback",
        "cert_callback": "GnuTLS's gnutls_certificate_retrieve_function2 (MHD_OPTION_HTTPS_CERT_CALLBACK)",
    },
}

PRODUCT_DIRS = ["common", "quota", "kube", "webhook", "controller", "cli", "certs", "http"]


def sources(root):
    for d in PRODUCT_DIRS:
        p = os.path.join(root, d)
        if not os.path.isdir(p):
            continue
        for name in sorted(os.listdir(p)):
            if name.endswith((".c", ".h")):
                yield os.path.join(d, name)


def functions(path, text):
    lines = strip(text).split("\n")
    start = 0  # first line after the previous top-level item
    i = 0
    while i < len(lines):
        line = lines[i]
        if line == "{":
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            sig_lines = lines[start:i]
            # The signature begins at the last blank line before the brace.
            k = len(sig_lines)
            while k > 0 and sig_lines[k - 1].strip():
                k -= 1
            sig = " ".join(s.strip() for s in sig_lines[k:])
            first = start + k
            m = re.search(r"([A-Za-z_]\w*)\s*\((.*)\)\s*(GQ_\w+\s*)*$", sig)
            if m and not sig.startswith(("struct ", "typedef", "enum ", "union ")) or (
                m and "(" in sig.split("=")[0]
            ):
                params = m.group(2).strip()
                depth, count = 0, 0
                if params and params != "void":
                    count = 1
                    for ch in params:
                        if ch in "([":
                            depth += 1
                        elif ch in ")]":
                            depth -= 1
                        elif ch == "," and depth == 0:
                            count += 1
                yield (path, first + 1, m.group(1), j - first + 1, count)
            i = j + 1
            start = i
            continue
        if line.startswith(("}", "#")) or line.rstrip().endswith(";") and not line.startswith(" "):
            start = i + 1
        i += 1


def include_cycles(root, files):
    graph = {}
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        deps = set()
        for inc in re.findall(r'^#include "([^"]+)"', text, re.M):
            if os.path.exists(os.path.join(root, inc)):
                deps.add(inc)
        graph[f] = deps
    # A module is a .c with its .h: a cycle is between modules.
    mod = lambda f: f[:-2]
    mgraph = {}
    for f, deps in graph.items():
        mgraph.setdefault(mod(f), set()).update(mod(d) for d in deps if mod(d) != mod(f))
    cycles, seen = [], set()
    for a in sorted(mgraph):
        for b in sorted(mgraph[a]):
            if a in mgraph.get(b, ()) and (b, a) not in seen:
                seen.add((a, b))
                cycles.append((a, b))
    return cycles


def main(argv):
    root, n_list, bounds = ".", 0, {}
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--list":
            n_list = int(args.pop(0))
        elif a == "--max":
            for kv in args.pop(0).split(","):
                k, v = kv.split("=")
                bounds[k] = int(v)
        else:
            root = a
    files = list(sources(root))
    fns = []
    for f in files:
        if f.endswith(".c"):
            fns.extend(functions(f, open(os.path.join(root, f), encoding="utf-8").read()))
    over7 = [f for f in fns if f[4] > 7 and f[2] not in FIXED_SIGNATURES.get(f[0], {})]
    cycles = include_cycles(root, files)
    figures = {
        "over60": len([f for f in fns if f[3] > 60]),
        "over100": len([f for f in fns if f[3] > 100]),
        "params": len(over7),
        "cycles": len(cycles),
    }
    print(f"functions: {len(fns)}")
    print(f"over 60 lines: {figures['over60']}")
    print(f"over 100 lines: {figures['over100']}")
    print(f"longest: {max((f[3] for f in fns), default=0)} lines")
    print(f"over 7 parameters: {figures['params']} (most: {max((f[4] for f in fns), default=0)})")
    print(f"include cycles: {len(cycles)}" + "".join(f" {a}<->{b}" for a, b in cycles))
    if n_list:
        for f in sorted(fns, key=lambda f: -f[3])[:n_list]:
            print(f"  {f[3]:4d} lines  {f[0]}:{f[1]} {f[2]}")
        for f in sorted(over7, key=lambda f: -f[4]):
            print(f"  {f[4]:4d} params {f[0]}:{f[1]} {f[2]}")
    worse = [f"{k} is {figures[k]}, above {v}" for k, v in bounds.items() if figures[k] > v]
    for w in worse:
        print(f"code_stats: {w}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
