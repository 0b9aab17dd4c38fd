#!/usr/bin/env python3
"""Every e2e test (test/e2e/t_NAME.sh, ctest e2e_NAME) has its row in
docs/e2e.md's table: the page that says what the suite proves must not fall
behind the suite. Usage: docs_tests_listed.py ROOT [E2E-MD]. Prints each
missing test and exits 1; prints "e2e.md lists every e2e test" otherwise."""
import os
import re
import sys

root = sys.argv[1]
page = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, 'docs', 'e2e.md')
with open(page, encoding='utf-8') as f:
    rows = set(re.findall(r'^\|\s*`(e2e_[a-z0-9_]+)`\s*\|', f.read(), re.M))
tests = sorted('e2e_' + n[2:-3] for n in os.listdir(os.path.join(root, 'test', 'e2e'))
               if n.startswith('t_') and n.endswith('.sh'))
missing = [t for t in tests if t not in rows]
for t in missing:
    print(f'{page}: no row for {t} (test/e2e/t_{t[4:]}.sh)')
if missing:
    sys.exit(1)
print('e2e.md lists every e2e test')
