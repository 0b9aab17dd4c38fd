// Command controller is cert-manager's controller reduced to what a
// Certificate signed by a self-signed or CA Issuer needs, wired from
// cert-manager's own pkg/ as its cmd/controller does (that command is a Go
// module of its own, which the module proxy does not serve). It is test
// tooling for the chart's cert-manager mode; nothing of it is in gpuquota.
//
// It runs, from controller.Known() (each package registers itself in init):
//   - the certificates controllers: trigger, key manager, request manager,
//     readiness, issuing, revision manager;
//   - the CertificateRequest approver and the self-signed and CA
//     CertificateRequest issuers;
//   - the Issuer and ClusterIssuer controllers (the self-signed and CA
//     issuer types register themselves with pkg/issuer).
//
// Left out of cmd/controller: ACME (orders, challenges, the HTTP-01 solver
// and DNS-01 providers), Vault and Venafi, CertificateSigningRequests, the
// ingress and Gateway API certificate shims, the metrics, healthz and pprof
// servers, leader election, the configuration file and feature-gate flags
// (the default gates apply), and the PEM size limits' flags (the defaults
// apply).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets that ClusterIssuers refer to")
	workers := flag.Int("workers", 2, "workers per controller")
	ownerRef := flag.Bool("enable-certificate-owner-ref", false,
		"make each Certificate the owner of its Secret, so that the Secret goes with it")
	flag.Parse()
	logf.InitLogs()
	defer logf.FlushLogs()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *clusterNS, *workers, *ownerRef); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager controller:", err)
		os.Exit(1)
	}
}

func run(rootCtx context.Context, kubeconfig, clusterNS string, workers int, ownerRef bool) error {
	log := logf.FromContext(rootCtx)
	g, rootCtx := errgroup.WithContext(rootCtx)
	factory, err := controller.NewContextFactory(rootCtx, controller.ContextOptions{
		Kubeconfig:    kubeconfig,
		IssuerOptions: controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
		// cert-manager's defaults for a failed request's back-off.
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           ownerRef,
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	ctx, err := factory.Build()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(controller.Known()))
	for n := range controller.Known() {
		names = append(names, n)
	}
	sort.Strings(names)
	log.Info("starting controllers: " + strings.Join(names, ", "))
	for _, n := range names {
		iface, err := controller.Known()[n](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", n, err)
		}
		g.Go(func() error { return iface.Run(workers, rootCtx) })
	}
	// The informers the controllers asked for, once they all have.
	ctx.SharedInformerFactory.Start(rootCtx.Done())
	ctx.KubeSharedInformerFactory.Start(rootCtx.Done())
	if err := g.Wait(); err != nil {
		return err
	}
	ctx.KubeSharedInformerFactory.Shutdown()
	ctx.SharedInformerFactory.Shutdown()
	return nil
}
