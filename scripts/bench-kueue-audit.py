#!/usr/bin/env python3
"""Times for scripts/bench-kueue.sh, read from kube-apiserver's audit log.

An ungate is the first successful PATCH of a pod (not of a subresource) by a
controller's user after the pod's create: gpuquota's controller and Kueue's
manager both remove their scheduling gate with a patch of the pod, and write
nothing else to a pending pod that is neither borrowing nor being deleted.

  latency USER NAMESPACE LOG...
      every pod created in NAMESPACE: from its create's requestReceivedTimestamp
      to the stageTimestamp of its ungate; prints one line of p50/p99/max (ms).
  follow USER NS_PREFIX COUNT TIMEOUT LOG
      read LOG (kube-apiserver's current audit log, followed across its
      rotation) from its end until COUNT pods in namespaces starting with
      NS_PREFIX have been ungated by USER, or TIMEOUT seconds pass; prints
      the count and the last ungate's stageTimestamp (Unix seconds).
Figures only; a line that is not a JSON audit event is skipped.
"""
import datetime
import json
import os
import sys
import time


def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def event(line):
    try:
        e = json.loads(line)
    except ValueError:
        return None
    if not isinstance(e, dict) or e.get("stage") != "ResponseComplete":
        return None
    ref = e.get("objectRef") or {}
    if ref.get("resource") != "pods" or ref.get("subresource") or "dryRun=" in e.get("requestURI", ""):
        return None
    return e


def is_ungate(e, user):
    return (e.get("verb") == "patch" and (e.get("user") or {}).get("username") == user
            and (e.get("responseStatus") or {}).get("code") == 200)


def quantile(d, p):
    return d[min(len(d) - 1, int(round(p * (len(d) - 1))))]


def latency(user, ns, logs):
    created, ungated = {}, {}
    for path in logs:
        with open(path, errors="replace") as f:
            for line in f:
                e = event(line)
                if e is None or e["objectRef"].get("namespace") != ns:
                    continue
                name = e["objectRef"].get("name")
                code = (e.get("responseStatus") or {}).get("code")
                if e.get("verb") == "create" and code == 201:
                    created[name] = ts(e["requestReceivedTimestamp"])
                elif is_ungate(e, user) and name in created and name not in ungated:
                    ungated[name] = ts(e["stageTimestamp"])
    d = sorted((ungated[n] - created[n]) * 1000 for n in ungated)
    if not d:
        print("pods 0 ungated of %d created" % len(created))
        return
    print("pods %d (of %d created)  p50 %.0f ms  p99 %.0f ms  max %.0f ms"
          % (len(d), len(created), quantile(d, 0.5), quantile(d, 0.99), d[-1]))


def follow(user, prefix, count, timeout, path):
    deadline = time.monotonic() + timeout
    seen, last = set(), 0.0
    f = open(path, errors="replace")
    f.seek(0, os.SEEK_END)
    buf = ""
    while len(seen) < count and time.monotonic() < deadline:
        chunk = f.read(1 << 20)
        if chunk:
            buf += chunk
            lines = buf.split("\n")
            buf = lines.pop()
            for line in lines:
                if user not in line:
                    continue
                e = event(line)
                if e is None or not is_ungate(e, user):
                    continue
                ref = e["objectRef"]
                if not ref.get("namespace", "").startswith(prefix):
                    continue
                key = (ref["namespace"], ref.get("name"))
                if key not in seen:
                    seen.add(key)
                    last = max(last, ts(e["stageTimestamp"]))
            continue
        try:  # rotated: finish the old file (read above), go on in the new one
            if os.stat(path).st_ino != os.fstat(f.fileno()).st_ino:
                f.close()
                f = open(path, errors="replace")
                buf = ""
                continue
        except OSError:
            pass
        time.sleep(0.2)
    f.close()
    print(len(seen), "%.3f" % last)


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "latency":
        latency(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 7 and sys.argv[1] == "follow":
        follow(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
