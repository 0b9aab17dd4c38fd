#!/usr/bin/env bash
# helm --post-renderer for the helm e2e test: the release without gpuquota's
# two Deployments, whose pods kwok would only pretend to run; the test runs
# the webhook and the controller as local processes behind the Service, as
# test/e2e/overlay does for the kustomize install.
exec python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
keep = [d for d in docs if not (d.get("kind") == "Deployment" and
        d["metadata"]["name"] in ("gpuquota-webhook", "gpuquota-controller"))]
assert len(docs) - len(keep) == 2, "expected the two gpuquota Deployments"
yaml.safe_dump_all(keep, sys.stdout, sort_keys=False)
'
