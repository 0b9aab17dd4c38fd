# Kubernetes client (kube/): unit tests, fuzz replays, integration against the
# kube-apiserver stand-in, and the list/watch benchmark.
