#!/usr/bin/env python3
"""The chart and the kustomize tree render the same objects.

Usage: compare.py KUSTOMIZE.yaml HELM.yaml

Every object `kubectl kustomize deploy/` renders must come out of
`helm template` with default values identical, once normalised:
  - the labels Helm adds to every object of a release and the pod-template
    annotation that rolls the Deployments on a configuration change are removed;
  - the ConfigMap's config.yaml is compared as YAML, not as text;
  - the Namespace is the release's own (helm install --create-namespace).
The chart's only objects of its own are the certificate machinery
(label app.kubernetes.io/component: certs). Exit 1 with a diff per object
that differs.
"""
import difflib
import sys

import yaml

HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version")


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def key(o):
    md = o.get("metadata", {})
    return (o.get("apiVersion"), o.get("kind"), md.get("namespace", ""), md.get("name"))


def normalise(o):
    md = o.setdefault("metadata", {})
    labels = md.get("labels") or {}
    for k in HELM_LABELS:
        labels.pop(k, None)
    if not labels:
        md.pop("labels", None)
    if o.get("kind") == "Deployment":
        tmd = o["spec"]["template"]["metadata"]
        ann = tmd.get("annotations") or {}
        ann.pop("checksum/config", None)
        if not ann:
            tmd.pop("annotations", None)
    if o.get("kind") == "ConfigMap":
        for k, v in list((o.get("data") or {}).items()):
            if k.endswith(".yaml"):
                o["data"][k] = yaml.safe_load(v)
    return o


def dump(o):
    return yaml.safe_dump(o, sort_keys=True, default_flow_style=False).splitlines(keepends=True)


def main():
    kust = {key(o): normalise(o) for o in load(sys.argv[1])}
    helm = {}
    for o in load(sys.argv[2]):
        labels = o.get("metadata", {}).get("labels") or {}
        if labels.get("app.kubernetes.io/component") == "certs":
            continue
        helm[key(o)] = normalise(o)
    bad = 0
    for k, o in kust.items():
        if k[1] == "Namespace":
            continue
        if k not in helm:
            print(f"drift: the chart renders no {k[1]} {k[2]}/{k[3]}")
            bad += 1
        elif helm[k] != o:
            print(f"drift: {k[1]} {k[2]}/{k[3]} differs (- kustomize, + helm):")
            sys.stdout.writelines(difflib.unified_diff(dump(o), dump(helm[k]), "kustomize", "helm"))
            bad += 1
    for k in helm:
        if k not in kust:
            print(f"drift: the chart renders {k[1]} {k[2]}/{k[3]}, which deploy/ does not")
            bad += 1
    n = sum(1 for k in kust if k[1] != "Namespace")
    if bad:
        print(f"drift: {bad} of {n} objects differ; deploy/helm/sync.sh copies deploy/ into the chart")
        return 1
    print(f"drift: none ({n} objects identical)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
