// podcreate: creates pods through kube-apiserver from many concurrent
// clients, each with its own HTTP/2 connection (as controllers do), and
// prints one JSON line of figures: requests/s, client latency percentiles,
// admitted/denied counts, CPU seconds of the given processes over the run,
// and the pods that exist afterwards per namespace. scripts/bench-pods.sh
// drives it; it asserts nothing.
//
//	podcreate run   --kubeconfig F --namespaces a,b,... --clients N --pods N
//	                --resource NAME --quantity Q --run ID [--pid NAME=PID]...
//	                [--arrival-rate R --seconds S]   (open loop: see open.go)
//	podcreate clean --kubeconfig F --namespaces a,b,... [--selector S]
//	podcreate fill  --kubeconfig F --namespaces a,b,... --clients N --pods N
//	                --resource NAME --quantity Q --run ID
//	podcreate churn, podcreate metrics: see churn.go
//
// Test tooling only: nothing of it is linked into gpuquota.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

type pidList []string

func (p *pidList) String() string     { return strings.Join(*p, ",") }
func (p *pidList) Set(s string) error { *p = append(*p, s); return nil }

var (
	kubeconfig  = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	namespaces  = flag.String("namespaces", "", "comma-separated namespaces; pod i goes to namespace i mod len")
	clients     = flag.Int("clients", 16, "concurrent clients, one HTTP/2 connection each")
	pods        = flag.Int("pods", 2000, "pod creates to send")
	resName     = flag.String("resource", "gpuquota.io/gpu-memory", "resource each pod asks for in its limits")
	quantity    = flag.String("quantity", "1Gi", "how much of --resource each pod asks for")
	runID       = flag.String("run", "r0", "run id: pod name prefix and label bench.gpuquota.io/run")
	selector    = flag.String("selector", "bench.gpuquota.io/run", "clean: label selector of the pods to delete")
	schedName   = flag.String("scheduler-name", "bench-none", "spec.schedulerName (no scheduler serves it: the pods stay pending, so the run measures creates alone)")
	watchQuota  = flag.Bool("watch-quotas", false, "run: watch GPUQuotas and GPUTenantQuotas and report their largest status")
	rewritten   = flag.Bool("rewritten", false, "send pods as gpuquota's /mutate leaves them (aliyun.com/gpu-mem: 1, its label and annotations), for filling a cluster with the webhooks off")
	protobuf    = flag.Bool("protobuf", true, "send and receive protobuf, as kube-controller-manager does")
	pids        pidList
	extraLabels pidList
)

func main() {
	flag.Var(&pids, "pid", "NAME=PID of a process whose CPU time (utime+stime) is read before and after the run (repeatable)")
	flag.Var(&extraLabels, "label", "KEY=VALUE: one more label on every pod, e.g. Kueue's kueue.x-k8s.io/queue-name (repeatable)")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: podcreate run|clean|fill|churn|metrics [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	if err := flag.CommandLine.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	nss := strings.Split(*namespaces, ",")
	if *namespaces == "" && mode != "metrics" {
		fail("--namespaces is required")
	}
	var err error
	switch mode {
	case "run":
		err = run(nss, false)
	case "fill":
		err = run(nss, true)
	case "clean":
		err = clean(nss)
	case "churn":
		err = churn(nss)
	case "metrics":
		err = metricsMode()
	default:
		fail("unknown mode " + mode)
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "podcreate:", msg)
	os.Exit(1)
}

// newClient: a clientset with a connection of its own. client-go shares one
// transport between configs that look alike; a dialer of our own per client
// keeps the connections apart. No client-side rate limit.
func newClient(base *rest.Config) (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(base)
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = d.DialContext
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.Timeout = 60 * time.Second
	cfg.UserAgent = "gpuquota-bench-podcreate"
	cfg.WarningHandler = rest.NoWarnings{} // one per rewritten pod: noise here
	if *protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return kubernetes.NewForConfig(cfg)
}

func restConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", *kubeconfig)
}

// kubeconfigClient: one client of --kubeconfig.
func kubeconfigClient() (*kubernetes.Clientset, error) {
	base, err := restConfig()
	if err != nil {
		return nil, err
	}
	return newClient(base)
}

func pod(i int) *corev1.Pod {
	var p *corev1.Pod
	if *rewritten {
		p = rewrittenPod(i)
	} else {
		p = pod0(i)
	}
	for _, kv := range extraLabels {
		k, v, _ := strings.Cut(kv, "=")
		p.Labels[k] = v
	}
	return p
}

func pod0(i int) *corev1.Pod {
	q := resource.MustParse(*quantity)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("%s-%06d", *runID, i),
			Labels: map[string]string{"bench.gpuquota.io/run": *runID, "app": "trainer"},
		},
		Spec: corev1.PodSpec{
			SchedulerName: *schedName,
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   "registry.example/cuda:12",
				Command: []string{"python", "train.py"},
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceName(*resName): q},
				},
			}},
		},
	}
}

// rewrittenPod: a 1Gi pod as /mutate returns it (aliyun backend).
func rewrittenPod(i int) *corev1.Pod {
	p := pod0(i)
	p.Labels["gpuquota.io/managed"] = "true"
	p.Annotations = map[string]string{
		"gpuquota.io/charged":          "gpu-memory=1Gi,gpus=0,gpu-pods=1",
		"gpuquota.io/gpu-requests":     `{"main":{"gpus":1,"memory":"1Gi"}}`,
		"gpuquota.io/original-request": `{"main":{"gpuquota.io/gpu-memory":"1Gi"}}`,
		"gpuquota.io/reservation":      fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
	}
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"aliyun.com/gpu-mem": resource.MustParse("1")}
	return p
}

// cpuTicks: utime + stime of a process, in clock ticks (USER_HZ = 100 on Linux).
func cpuTicks(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	s = s[strings.LastIndexByte(s, ')')+2:] // fields from 3 (state) on
	f := strings.Fields(s)
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return ut + st, nil
}

type result struct {
	Mode       string             `json:"mode"`
	Run        string             `json:"run"`
	Clients    int                `json:"clients"`
	Namespaces int                `json:"namespaces"`
	Sent       int                `json:"sent"`
	Admitted   int64              `json:"admitted"`
	Denied     int64              `json:"denied"`
	Errors     int64              `json:"errors"`
	FirstError string             `json:"first_error,omitempty"`
	FirstDeny  string             `json:"first_deny,omitempty"`
	Seconds    float64            `json:"seconds"`
	PerSecond  float64            `json:"per_second"`
	P50ms      float64            `json:"p50_ms"`
	P99ms      float64            `json:"p99_ms"`
	P999ms     float64            `json:"p999_ms"`
	MaxMs      float64            `json:"max_ms"`
	CPUSeconds map[string]float64 `json:"cpu_s"`
	Exist      map[string]int     `json:"exist"`
	// kube-apiserver's own counters over the run: requests by verb,
	// resource and code (watches left out), and per admission webhook the
	// calls and their mean duration as kube-apiserver saw them.
	Requests map[string]float64 `json:"apiserver_requests"`
	// --watch-quotas: the largest quota object (JSON bytes) and the most
	// reservations any GPUQuota or GPUTenantQuota held during the run.
	QuotaMaxBytes        int             `json:"quota_max_bytes,omitempty"`
	QuotaMaxReservations int             `json:"quota_max_reservations,omitempty"`
	Webhooks             map[string]hook `json:"webhooks"`
	// --arrival-rate (open loop): the latencies above are from each
	// create's scheduled time; send_ms is the call alone, from its send;
	// max_lag_ms the worst dispatch behind its slot.
	TargetRate float64 `json:"target_per_second,omitempty"`
	MaxLagMs   float64 `json:"max_lag_ms,omitempty"`
	SendMs     *qs     `json:"send_ms,omitempty"`
	// the 5 slowest creates: when each was due, seconds into the run
	SlowestAt []float64 `json:"slowest_at_s,omitempty"`
}

// slowest: when the k slowest of lat were due, in seconds from the start of
// s, slowest first (lat not sorted yet).
func slowest(lat []time.Duration, s schedule, k int) []float64 {
	idx := make([]int, len(lat))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return lat[idx[a]] > lat[idx[b]] })
	out := []float64{}
	for _, i := range idx[:min(k, len(idx))] {
		out = append(out, math.Round(s.slot(i).Sub(s.start).Seconds()*100)/100)
	}
	return out
}

// qs: latency quantiles in milliseconds.
type qs struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// quantiles sorts d and takes its quantiles.
func quantiles(d []time.Duration) *qs {
	if len(d) == 0 {
		return &qs{}
	}
	sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
	return &qs{quantile(d, 0.50), quantile(d, 0.99), quantile(d, 0.999), quantile(d, 1)}
}

type hook struct {
	Calls  float64 `json:"calls"`
	MeanMs float64 `json:"mean_ms"`
}

// scrape: kube-apiserver's /metrics, the series this program reports.
func scrape(ctx context.Context, c *kubernetes.Clientset) (map[string]float64, error) {
	b, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		var key string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			l := labels(line)
			if l["verb"] == "WATCH" || l["resource"] == "" {
				continue
			}
			r := l["resource"]
			if l["subresource"] != "" {
				r += "/" + l["subresource"]
			}
			key = "req " + l["verb"] + " " + r + " " + l["code"]
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_sum{"),
			strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_count{"):
			l := labels(line)
			if l["operation"] != "CREATE" {
				continue
			}
			kind := "sum"
			if strings.Contains(line, "_count{") {
				kind = "count"
			}
			key = "hook " + kind + " " + l["name"]
		default:
			continue
		}
		if v, err := sampleValue(line); err == nil {
			out[key] += v
		}
	}
	return out, nil
}

// sampleValue: the value of a Prometheus text-format sample line.
func sampleValue(line string) (float64, error) {
	f := strings.Fields(line)
	return strconv.ParseFloat(f[len(f)-1], 64)
}

// quantile: the q-th quantile of sorted durations, in milliseconds.
func quantile(sorted []time.Duration, q float64) float64 {
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

func labels(line string) map[string]string {
	m := map[string]string{}
	in := line[strings.IndexByte(line, '{')+1 : strings.LastIndexByte(line, '}')]
	for _, kv := range strings.Split(in, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			m[k] = strings.Trim(v, `"`)
		}
	}
	return m
}

func diffMetrics(before, after map[string]float64, res *result) {
	res.Requests, res.Webhooks = map[string]float64{}, map[string]hook{}
	for k, v := range after {
		d := v - before[k]
		if d == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(k, "req "):
			res.Requests[k[4:]] = d
		case strings.HasPrefix(k, "hook count "):
			name := k[len("hook count "):]
			sum := after["hook sum "+name] - before["hook sum "+name]
			res.Webhooks[name] = hook{Calls: d, MeanMs: 1000 * sum / d}
		}
	}
}

func run(nss []string, quiet bool) error {
	base, err := restConfig()
	if err != nil {
		return err
	}
	cs := make([]*kubernetes.Clientset, *clients)
	ctx := context.Background()
	// Open every connection before the clock starts.
	var wg sync.WaitGroup
	errs := make([]error, *clients)
	for c := range cs {
		if cs[c], err = newClient(base); err != nil {
			return err
		}
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			_, errs[c] = cs[c].CoreV1().Namespaces().Get(ctx, nss[c%len(nss)], metav1.GetOptions{})
		}(c)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	n := *pods
	if *arrivalRate > 0 {
		n = newSchedule(*arrivalRate, *churnSecs).n
	}
	res := result{Mode: "run", Run: *runID, Clients: *clients, Namespaces: len(nss), Sent: n,
		CPUSeconds: map[string]float64{}, Exist: map[string]int{}}
	before := map[string]int64{}
	lat := make([]time.Duration, n)
	var next, admitted, denied, errCount atomic.Int64
	var firstMu sync.Mutex
	record := func(dst *string, s string) {
		firstMu.Lock()
		if *dst == "" {
			*dst = s
		}
		firstMu.Unlock()
	}
	// create: pod i through client c, counted.
	create := func(c, i int) {
		_, err := cs[c].CoreV1().Pods(nss[i%len(nss)]).Create(ctx, pod(i), metav1.CreateOptions{})
		switch {
		case err == nil:
			admitted.Add(1)
		case apierrors.IsForbidden(err):
			denied.Add(1)
			record(&res.FirstDeny, err.Error())
		default:
			errCount.Add(1)
			record(&res.FirstError, err.Error())
		}
	}
	stopWatch := func() {}
	if *watchQuota {
		if stopWatch, err = watchQuotas(ctx, base, &res); err != nil {
			return err
		}
	}
	m0, err := scrape(ctx, cs[0])
	if err != nil {
		return fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	readCPU(before)
	start := time.Now()
	if *arrivalRate > 0 {
		// Timed from the slot; the call alone (from its send) apart.
		svc := make([]time.Duration, n)
		var lag maxLag
		sched := newSchedule(*arrivalRate, *churnSecs) // its first slot 50 ms from now
		start = sched.start
		openLoop(sched, nil, &lag, func(i int, slot time.Time) {
			t0 := time.Now()
			create(i%len(cs), i)
			lat[i], svc[i] = time.Since(slot), time.Since(t0)
		})
		res.TargetRate, res.MaxLagMs, res.SendMs = *arrivalRate, lag.ms(), quantiles(svc)
		res.SlowestAt = slowest(lat, sched, 5)
	} else {
		for c := range cs {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					t0 := time.Now()
					create(c, i)
					lat[i] = time.Since(t0)
				}
			}(c)
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	after := map[string]int64{}
	readCPU(after)
	m1, err := scrape(ctx, cs[0])
	if err != nil {
		return fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	diffMetrics(m0, m1, &res)
	stopWatch()
	for k, v := range after {
		res.CPUSeconds[k] = float64(v-before[k]) / 100
	}
	res.Admitted, res.Denied, res.Errors = admitted.Load(), denied.Load(), errCount.Load()
	res.Seconds = elapsed.Seconds()
	res.PerSecond = float64(n) / elapsed.Seconds()
	q := quantiles(lat)
	res.P50ms, res.P99ms, res.P999ms, res.MaxMs = q.P50, q.P99, q.P999, q.Max

	// What exists now, per namespace: the over-admission check.
	sel := "bench.gpuquota.io/run=" + *runID
	for _, ns := range nss {
		if _, seen := res.Exist[ns]; seen {
			continue
		}
		n, err := countPods(ctx, cs[0], ns, sel)
		if err != nil {
			return err
		}
		res.Exist[ns] = n
	}
	if quiet {
		fmt.Fprintf(os.Stderr, "fill %s: %d admitted, %d denied, %d errors in %.1f s (%.0f/s)%s\n",
			*runID, res.Admitted, res.Denied, res.Errors, res.Seconds, res.PerSecond, firstErr(res))
		return nil
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func firstErr(r result) string {
	if r.FirstError == "" {
		return ""
	}
	return "; first error: " + r.FirstError
}

func countPods(ctx context.Context, c *kubernetes.Clientset, ns, sel string) (int, error) {
	n, cont := 0, ""
	for {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: 5000, Continue: cont})
		if err != nil {
			return 0, err
		}
		n += len(l.Items)
		if cont = l.Continue; cont == "" {
			return n, nil
		}
	}
}

// clean: delete the benchmark's pods in every namespace (one delete-collection
// each, in parallel; pending pods go at once) and wait until none is left.
func clean(nss []string) error {
	c, err := kubeconfigClient()
	if err != nil {
		return err
	}
	ctx := context.Background()
	zero := int64(0)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []error
	for _, ns := range nss {
		wg.Add(1)
		go func(ns string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
				metav1.ListOptions{LabelSelector: *selector})
			if err == nil {
				deadline := time.Now().Add(120 * time.Second)
				for {
					var n int
					if n, err = countPods(ctx, c, ns, *selector); err != nil || n == 0 {
						break
					}
					if time.Now().After(deadline) {
						err = fmt.Errorf("%s: %d pods still there after 120 s", ns, n)
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			if err != nil {
				mu.Lock()
				all = append(all, err)
				mu.Unlock()
			}
		}(ns)
	}
	wg.Wait()
	return errors.Join(all...)
}

// watchQuotas follows every GPUQuota and GPUTenantQuota from now until the
// returned function is called, noting the largest object and the most
// reservations seen: each charge rewrites the whole status.
func watchQuotas(ctx context.Context, base *rest.Config, res *result) (func(), error) {
	dc, err := dynamic.NewForConfig(base)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range []string{"gpuquotas", "gputenantquotas"} {
		gvr := schema.GroupVersionResource{Group: "gpuquota.io", Version: "v1alpha1", Resource: r}
		l, err := dc.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			cancel()
			return nil, err
		}
		w, err := dc.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
		if err != nil {
			cancel()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok {
						continue
					}
					b, _ := u.MarshalJSON()
					rs, _, _ := unstructured.NestedSlice(u.Object, "status", "reservations")
					mu.Lock()
					res.QuotaMaxBytes = max(res.QuotaMaxBytes, len(b))
					res.QuotaMaxReservations = max(res.QuotaMaxReservations, len(rs))
					mu.Unlock()
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }, nil
}
