#!/usr/bin/env python3
"""check_layers.py ROOT: the layering rules of docs/architecture.md and the
banned-call list, checked over the product's C sources under ROOT, and how
the tests under ROOT/test include their own headers.

Exit 0 when clean; 1 with one line per violation, FILE:LINE: what and why.
Comments and string literals are ignored; nothing is compiled."""
import os
import re
import sys

# What each layer may include of the project, from the bottom up.
LAYERS = {
    "common": {"common"},
    "quota": {"common", "quota"},
    "http": {"common", "http"},
    "kube": {"common", "quota", "kube"},
    "certs": {"common", "quota", "kube", "certs"},
    "webhook": {"common", "quota", "kube", "http", "webhook"},
    "controller": {"common", "quota", "kube", "http", "controller"},
    "cli": {"common", "quota", "kube", "certs", "http", "webhook", "controller", "cli"},
}

# One adapter per library: the only places that include its headers.
ADAPTERS = [
    (re.compile(r"^curl/"), {"kube"}, "libcurl belongs to kube/"),
    (re.compile(r"^openssl/"), {"certs"}, "OpenSSL belongs to certs/"),
    (re.compile(r"^(microhttpd\.h|gnutls/)"), {"http/server.c"},
     "libmicrohttpd and GnuTLS belong to http/server.c"),
    (re.compile(r"^yaml\.h$"), {"common/yamljson.c", "quota", "kube"},
     "libyaml belongs to common/yamljson.c, quota/ and kube/"),
]

# The pure core: no sockets, files, clocks, threads, signals or logging.
PURE = "quota"
PURE_HEADERS = re.compile(
    r"^(sys/socket\.h|netinet/.*|arpa/.*|netdb\.h|unistd\.h|fcntl\.h|sys/stat\.h|dirent\.h|"
    r"time\.h|sys/time\.h|pthread\.h|stdatomic\.h|signal\.h|common/gq_log\.h)$")
PURE_CALLS = ["fopen", "freopen", "open", "read", "write", "close", "socket", "connect",
              "time", "clock_gettime", "gettimeofday", "getenv", "sleep", "usleep",
              "nanosleep", "rand", "srand"]

# curl's checksrc habit: calls with a bounded or reentrant replacement.
BANNED = {
    "gets": "no bound; use fgets/getline",
    "strcpy": "no bound; use gq_copy_trunc",
    "stpcpy": "no bound; use gq_copy_trunc",
    "strcat": "no bound; use snprintf or gq_strbuf",
    "strncat": "bound easy to get wrong; use snprintf or gq_strbuf",
    "sprintf": "no bound; use snprintf",
    "vsprintf": "no bound; use vsnprintf",
    "atoi": "no error detection; use strtol with checks",
    "atol": "no error detection; use strtol with checks",
    "atoll": "no error detection; use strtoll with checks",
    "atof": "no error detection; use strtod with checks",
    "strtok": "not reentrant; use strtok_r or memchr",
    "tmpnam": "racy; use mkstemp",
    "tempnam": "racy; use mkstemp",
    "mktemp": "racy; use mkstemp",
    "alloca": "unbounded stack; use malloc",
}

# FILE: {call: reason} exceptions, each with the reason it is kept.
ALLOWED = {}

# Names say their layer: every function a layer's header declares starts
# with the layer's prefix, so a call site tells which layer it reaches into.
PREFIXES = {"common": "gq_", "quota": "gq_", "http": "http_", "kube": "kube_",
            "certs": "certs_", "webhook": "wh_", "controller": "ctl_", "cli": "cli_"}
DECL = re.compile(r"^(?!typedef\b|static\b|#|\s)[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\s*\(", re.M)

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def strip(text):
    """Blank out comments and string/char literals, keeping line breaks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_file(root, rel, problems):
    layer = rel.split("/", 1)[0]
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        text = f.read()
    allowed_calls = ALLOWED.get(rel, {})
    for no, line in enumerate(text.split("\n"), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        kind, name = m.groups()
        where = f"{rel}:{no}"
        if kind == '"':
            top = name.split("/", 1)[0] if "/" in name else None
            if top in LAYERS and top not in LAYERS[layer]:
                problems.append(f"{where}: {layer}/ may not include {name} "
                                f"(allowed: {', '.join(sorted(LAYERS[layer]))})")
            elif top is None and os.path.basename(name) != "cli_commands.h":
                problems.append(f'{where}: include "{name}" by its layer ("LAYER/{name}")')
        for pat, owners, why in ADAPTERS:
            if (kind == "<" and pat.search(name) and layer not in owners
                    and rel not in owners):
                problems.append(f"{where}: <{name}>: {why}")
        if layer == PURE and PURE_HEADERS.search(name):
            problems.append(f"{where}: {name}: quota/ is pure (no I/O, clocks, threads, logging)")
    code = strip(text)
    if rel.endswith(".h") and layer in PREFIXES:
        for m in DECL.finditer(code):
            if not m.group(1).startswith(PREFIXES[layer]):
                no = code.count("\n", 0, m.start(1)) + 1
                problems.append(f"{rel}:{no}: {m.group(1)}: a function of {layer}/ is named "
                                f"{PREFIXES[layer]}...")
    calls = dict((c, why) for c, why in BANNED.items() if c not in allowed_calls)
    if layer == PURE:
        calls.update((c, "quota/ is pure: take it as a parameter or do it in a shell")
                     for c in PURE_CALLS)
    pat = re.compile(r"(?<![A-Za-z0-9_.>])(" + "|".join(map(re.escape, calls)) + r")\s*\(")
    for no, line in enumerate(code.split("\n"), 1):
        for m in pat.finditer(line):
            problems.append(f"{rel}:{no}: {m.group(1)}(): {calls[m.group(1)]}")


# Tests include a test-only header by its path under test/ ("support/faultstore.h",
# "standin/standin.h") or by its bare name from their own folder; data is not code.
TEST = "test"
TEST_SKIP = {"test/data"}


def check_test_file(root, rel, problems):
    here = os.path.dirname(rel)
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        text = f.read()
    for no, line in enumerate(text.split("\n"), 1):
        m = INCLUDE.match(line)
        if not m or m.group(1) != '"':
            continue
        name = m.group(2)
        top = name.split("/", 1)[0] if "/" in name else None
        if top in LAYERS or os.path.basename(name) == "cli_commands.h":
            continue
        where = os.path.join(root, here if top is None else TEST, name)
        if not os.path.isfile(where):
            problems.append(f'{rel}:{no}: include "{name}": a test header is included by its '
                            f"path under test/ or by its bare name from the same folder")


def test_files(root):
    for d, dirs, files in os.walk(os.path.join(root, TEST)):
        rel = os.path.relpath(d, root).replace(os.sep, "/")
        dirs[:] = sorted(x for x in dirs if f"{rel}/{x}" not in TEST_SKIP)
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield f"{rel}/{f}"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = []
    for layer in LAYERS:
        d = os.path.join(root, layer)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h")):
                check_file(root, f"{layer}/{f}", problems)
    for rel in test_files(root):
        check_test_file(root, rel, problems)
    for p in problems:
        print(p)
    print(f"check_layers: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
