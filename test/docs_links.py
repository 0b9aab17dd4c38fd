#!/usr/bin/env python3
"""Every link in README.md and docs/ stays inside the repository and points at
something that exists: no URLs, no absolute paths, no relative path climbing
out of the checkout, no missing file, no missing #anchor in a Markdown file.
Usage: docs_links.py ROOT. Prints each bad link as FILE:LINE: message."""
import os
import re
import sys

LINK = re.compile(r'!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$')
AUTO = re.compile(r'<((?:[a-zA-Z][a-zA-Z0-9+.-]*):[^>\s]+)>')
SCHEME = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*:')
FENCE = re.compile(r'^\s{0,3}(```|~~~)')


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    h = re.sub(r'`|\*\*|\*|_(?=\w)|(?<=\w)_', '', heading.strip()).lower()
    h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', h)
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')


def lines_outside_code(path, strip_code=True):
    fenced = False
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                # inline code spans hold examples, not links
                yield n, re.sub(r'`[^`]*`', '', line) if strip_code else line


def anchors(path):
    out, seen = set(), {}
    for _, line in lines_outside_code(path, strip_code=False):
        m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else '%s-%d' % (s, k))
        for a in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
            out.add(a)
    return out


def check(root, path, bad):
    rel = os.path.relpath(path, root)
    for n, line in lines_outside_code(path):
        targets = LINK.findall(line) + AUTO.findall(line)
        m = REF.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            where = '%s:%d: %s' % (rel, n, t)
            if SCHEME.match(t):
                bad.append(where + ': leaves the repository (a URL)')
                continue
            if t.startswith('/'):
                bad.append(where + ': absolute path (leaves the repository)')
                continue
            file_part, _, anchor = t.partition('#')
            target = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if os.path.relpath(target, root).startswith('..'):
                bad.append(where + ': leaves the repository')
            elif not os.path.exists(target):
                bad.append(where + ': no such file')
            elif anchor and target.endswith('.md') and anchor not in anchors(target):
                bad.append(where + ': no heading #%s there' % anchor)


def main():
    root = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else '.')
    files = [os.path.join(root, 'README.md')]
    docs = os.path.join(root, 'docs')
    for d, _, names in os.walk(docs):
        files += [os.path.join(d, x) for x in sorted(names) if x.endswith('.md')]
    bad = []
    for f in files:
        check(root, f, bad)
    for b in bad:
        print(b)
    print('%d file(s), %d bad link(s)' % (len(files), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
