#!/usr/bin/env python3
"""README.md's command list is what the binary's --help says: the code block
under "## Commands" must be every subcommand's usage, as `gpuquota COMMAND
--help` prints it (without "usage: "), in the order below. A flag added to a
command and not to the README fails here with the difference.

Usage: readme_usage.py GPUQUOTA ROOT [--write]  (--write rewrites the block)."""
import difflib
import subprocess
import sys

ORDER = ["webhook", "controller", "admit", "audit", "queue", "certs", "config", "top", "explain"]
PREFIX = "usage: "


def usage(gq, cmd):
    out = subprocess.run([gq, cmd, "--help"], capture_output=True, text=True, timeout=30)
    lines = (out.stdout + out.stderr).split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(PREFIX))
    block = []
    for line in lines[start:]:
        if not line.strip():
            break
        block.append(line[len(PREFIX):] if line.startswith((PREFIX, " " * len(PREFIX))) else line)
    return block


def main():
    gq, root = sys.argv[1], sys.argv[2]
    want = [line for cmd in ORDER for line in usage(gq, cmd)] + ["gpuquota version"]
    path = f"{root}/README.md"
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head = text.index("## Commands")
    start = text.index("```\n", head) + 4
    end = text.index("```", start)
    have = text[start:end].rstrip("\n").split("\n")
    if have == want:
        print("README lists every command as --help shows it")
        return 0
    if "--write" in sys.argv:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text[:start] + "\n".join(want) + "\n" + text[end:])
        print("README.md rewritten")
        return 0
    sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in have], [l + "\n" for l in want],
                                               "README.md", "--help"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
