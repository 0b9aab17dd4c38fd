#!/usr/bin/env python3
"""Every test the docs and the shipped files name exists. A page, a values
file or a script comment that says "the helm_drift test proves it" sends a
reader to a test that does not exist; this fails on each such name.

Names checked: every e2e_NAME and helm_NAME token, and every NAME in "the
NAME test" or "ctest -R NAME", in README.md, docs/, deploy/ and scripts/.
Known tests: the names `ctest -N` lists in the build tree, plus those a
build's options leave out (test/e2e/t_NAME.sh, and the names test/*.cmake
registers).

Usage: docs_tests_named.py ROOT BUILD-DIR. Prints each unknown name with
where it stands and exits 1; "every test named exists" otherwise."""
import os
import re
import subprocess
import sys

root, build = sys.argv[1], sys.argv[2]
out = subprocess.run(["ctest", "-N", "--test-dir", build], capture_output=True, text=True,
                     check=True).stdout
known = set(re.findall(r"^\s*Test\s+#\d+: (\S+)$", out, re.M))
e2e = os.path.join(root, "test", "e2e")
known |= {"e2e_" + n[2:-3] for n in (os.listdir(e2e) if os.path.isdir(e2e) else [])
          if n.startswith("t_") and n.endswith(".sh")}
tests = os.path.join(root, "test")
for n in sorted(os.listdir(tests)) if os.path.isdir(tests) else []:
    if n.endswith(".cmake"):
        with open(os.path.join(tests, n), encoding="utf-8") as f:
            known |= set(re.findall(r"(?:add_test\(NAME|gq_output_test\() *(\w+)", f.read()))

# A shell variable ($helm_dir, helm_sum=...) is not a test name.
NAMES = [re.compile(r"(?<![\w/.${-])((?:e2e|helm)_[a-z0-9_]+)\b(?![=\[}.])"),
         re.compile(r"\bthe `?([a-z][a-z0-9_]*_[a-z0-9_]+)`? test\b")]
# ctest -R takes a regular expression: it must select at least one test.
SELECTS = re.compile(r"\bctest -R [\"'`]?([^\s\"'`]+)")


def files():
    if os.path.isfile(os.path.join(root, "README.md")):
        yield os.path.join(root, "README.md")
    for top in ("docs", "deploy", "scripts"):
        for d, dirs, names in os.walk(os.path.join(root, top)):
            dirs.sort()
            for n in sorted(names):
                if n.endswith((".md", ".yaml", ".yml", ".sh", ".tpl", ".txt", ".json")):
                    yield os.path.join(d, n)


bad = []
for path in files():
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            where = f"{os.path.relpath(path, root)}:{no}"
            for pat in NAMES:
                for m in pat.finditer(line):
                    if m.group(1) not in known:
                        bad.append(f"{where}: no test named {m.group(1)}")
            for m in SELECTS.finditer(line):
                try:
                    sel = re.compile(m.group(1))
                except re.error:
                    bad.append(f"{where}: ctest -R {m.group(1)}: not a regular expression")
                    continue
                if not any(sel.search(t) for t in known):
                    bad.append(f"{where}: ctest -R {m.group(1)} selects no test")
for b in sorted(set(bad)):
    print(b)
if bad:
    sys.exit(1)
print("every test named exists")
