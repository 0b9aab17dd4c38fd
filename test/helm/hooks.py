#!/usr/bin/env python3
"""The hooks of one phase of a rendered chart, in the order helm runs them.

Usage: hooks.py RENDERED.yaml PHASE   (e.g. pre-install, post-delete)

Prints a JSON list, ordered as helm orders hooks (weight, then kind, then
name): {"kind", "name", "doc", "deleteOnSuccess", and for a Job "sa",
"init" and "containers" as [{"command": [...], "env": {...}}]}.
kwok runs no containers, so the helm e2e test runs these Jobs' commands
itself, as their service accounts, in this order.
"""
import json
import sys

import yaml

# helm's InstallOrder for the kinds hooks of this chart use.
ORDER = ["ServiceAccount", "Secret", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Role",
         "RoleBinding", "Job"]


def main():
    path, phase = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    out = []
    for d in docs:
        ann = d.get("metadata", {}).get("annotations") or {}
        phases = [p.strip() for p in ann.get("helm.sh/hook", "").split(",") if p.strip()]
        if phase not in phases:
            continue
        policy = [p.strip() for p in ann.get("helm.sh/hook-delete-policy", "").split(",")]
        h = {"kind": d["kind"], "name": d["metadata"]["name"], "doc": d,
             "weight": int(ann.get("helm.sh/hook-weight", "0")),
             "deleteOnSuccess": "hook-succeeded" in policy}
        if d["kind"] == "Job":
            spec = d["spec"]["template"]["spec"]
            h["sa"] = spec.get("serviceAccountName", "default")

            def cmds(cs):
                return [{"command": (c.get("command") or []) + (c.get("args") or []),
                         "env": {e["name"]: e.get("value", "") for e in c.get("env") or []}}
                        for c in cs or []]
            h["init"] = cmds(spec.get("initContainers"))
            h["containers"] = cmds(spec.get("containers"))
        out.append(h)
    rank = {k: i for i, k in enumerate(ORDER)}
    out.sort(key=lambda h: (h["weight"], rank.get(h["kind"], len(ORDER)), h["name"]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
