module gpuquota.test/k8s-tools/prometheus-operator

// prometheus-operator's CRDs (example/prometheus-operator-crd of the module)
// for the chart's ServiceMonitor and PodMonitor objects: test/helm/install.sh
// installs the real CRDs and has kube-apiserver validate the chart's objects
// against them (test/helm/prometheus-operator-crds.sh). Nothing is built.
go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
