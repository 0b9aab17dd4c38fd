#!/usr/bin/env python3
"""Which of the files one `kubectl create -f A -f B ...` was given it created,
and what it said about each it did not.

kubectl goes on after a refusal: it prints 'KIND/NAME created' on stdout for
each object it created and 'Error from server (REASON): error when creating
"FILE": MESSAGE' on stderr for each it did not (the message may go on over
more lines); 'Warning: ...' lines are the admission webhooks' warnings.

  kubectl_results.py split [--show] OUT FILE...

reads kubectl's output (stdout and stderr together) from OUT and writes, for
each FILE, FILE.out (what kubectl said about it) and FILE.rc: 0 when it was
created, 1 when it was refused, 2 when kubectl named it neither way (the
connection failed, say; FILE.out then holds every line naming no file).
An object counts as created from a line ending in '/NAME created', NAME
being the file's name without its extension, as the e2e tests name them.
--show also prints, per FILE, its name, its status and what kubectl said.
"""
import os
import re
import sys

REFUSAL = re.compile(r'^(Error from server.*?|error: )error when creating "([^"]+)": ')


def refusals(text):
    """The refusals in kubectl's output, by file; and the lines that name no file."""
    out, stray, cur = {}, [], None
    for line in text.splitlines():
        m = REFUSAL.match(line)
        if m:
            cur = m.group(2)
            out[cur] = line
        elif line.startswith("Warning: ") or re.search(r"/\S+ created$", line):
            cur = None
        elif cur is not None:
            out[cur] += "\n" + line
        else:
            stray.append(line)
    return out, stray


def split(out_path, files, show=False):
    text = open(out_path).read()
    refused, stray = refusals(text)
    created = set(re.findall(r"/(\S+) created$", text, re.M))
    for f in files:
        name = os.path.splitext(os.path.basename(f))[0]
        if f in refused:
            rc, said = 1, refused[f]
        elif name in created:
            rc, said = 0, "%s created" % name
        else:
            rc, said = 2, "\n".join(stray) or "kubectl said nothing of it"
        with open(f + ".out", "w") as o:
            o.write(said + "\n")
        with open(f + ".rc", "w") as o:
            o.write("%d\n" % rc)
        if show:
            print("%s %d %s" % (os.path.basename(f), rc, said))


def main(argv):
    show = len(argv) > 2 and argv[2] == "--show"
    args = argv[3:] if show else argv[2:]
    if len(argv) >= 3 and argv[1] == "split" and args:
        split(args[0], args[1:], show)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
