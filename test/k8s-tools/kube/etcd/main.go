// Command etcd is etcd's own server, built from its Go module for the
// e2e control plane (test tooling only; nothing of it is linked into gpuquota).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
