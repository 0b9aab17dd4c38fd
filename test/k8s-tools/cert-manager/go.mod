module gpuquota.test/k8s-tools/cert-manager

// cert-manager CRDs for the helm chart test (deploy/crds of the module);
// its controller and cainjector are not buildable from the module proxy.
go 1.24.0

require github.com/cert-manager/cert-manager v1.21.2
