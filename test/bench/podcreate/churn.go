// churn: pod creates and deletes at a kept pace over namespaces a fill has
// populated, while a GPUQuota watch times how long each one takes to show
// in its namespace's status.used (the controller's event -> status
// latency against the real kube-apiserver); plus kube-apiserver's request
// counters and watch gauges over the run.
//
//	podcreate churn   --kubeconfig F --namespaces a,b,... --rate R --seconds S
//	                  --clients N --run ID --fill-run ID --fill-pods N --delete-from K
//	                  [--latency=false] [--open-loop] [--as-user] [--pid NAME=PID]...
//	podcreate metrics --kubeconfig F
//
// churn, op i of each kind: the create goes to namespace i mod len (pod
// ID-%06d, as /mutate leaves it, so the webhooks may be off; with --as-user
// as a user writes it, for the webhooks to charge); the delete
// removes fill pod K+i (FILLRUN-%06d, in namespace (K+i) mod len, as the
// fill placed it). With K = len/2 the two kinds touch different namespaces
// at any moment. Like test/bench/bench_controller.c, an op in a namespace
// whose previous op the watch has not seen yet is skipped (and counted).
// Latency is from the create/delete call returning to the watch event whose
// status.used gpu-memory includes it (0 if the event came first), and also
// from the call being sent. create_ms and delete_ms time each call from its
// slot on the schedule, the lag behind it included (with --open-loop there
// is no such lag but the dispatcher's own). SIGINT or SIGTERM ends the pace
// early (--seconds is then a bound: size the fill to it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

var (
	churnRate  = flag.Float64("rate", 100, "churn: creates per second, and as many deletes per second")
	churnSecs  = flag.Float64("seconds", 20, "churn, and run with --arrival-rate: how long the pace is kept")
	fillRun    = flag.String("fill-run", "scale", "churn: run id of the fill whose pods are deleted")
	fillPods   = flag.Int("fill-pods", 0, "churn: pods the fill created")
	deleteFrom = flag.Int("delete-from", -1, "churn: first fill pod index to delete (default: namespaces/2)")
	latency    = flag.Bool("latency", true, "churn: watch GPUQuotas and time each op to its status")
	churnOpen  = flag.Bool("open-loop", false, "churn: each op sent at its time in a goroutine of its own (open.go), not by --clients workers per kind that wait for their call")
	asUser     = flag.Bool("as-user", false, "churn: create pods as a user writes them (--resource, --quantity), for the webhooks to rewrite and charge, not as /mutate leaves them")
)

var gpuquotas = schema.GroupVersionResource{Group: "gpuquota.io", Version: "v1alpha1", Resource: "gpuquotas"}

// nsState: one namespace's op in flight, as the watch must see it.
type nsState struct {
	mu       sync.Mutex
	count    int  // status.used gpu-memory / 1Gi when nothing is pending
	known    bool // count read from the list
	pending  bool
	expect   int
	sent     time.Time
	returned time.Time // zero until the call returned
	seen     time.Time // zero until the watch saw expect
}

type churnResult struct {
	Mode       string             `json:"mode"`
	Run        string             `json:"run"`
	TargetRate float64            `json:"target_per_second"`
	Clients    int                `json:"clients"`
	Namespaces int                `json:"namespaces"`
	StartUnix  float64            `json:"start_unix"` // the first slot, epoch seconds
	Seconds    float64            `json:"seconds"`
	Creates    int64              `json:"creates"`
	Deletes    int64              `json:"deletes"`
	Skipped    int64              `json:"skipped"`
	Errors     int64              `json:"errors"`
	FirstError string             `json:"first_error,omitempty"`
	CreateRate float64            `json:"creates_per_second"`
	DeleteRate float64            `json:"deletes_per_second"`
	MaxLagMs   float64            `json:"max_lag_ms"`              // worst start of an op behind its slot
	CallMs     pcts               `json:"call_ms"`                 // create/delete call, client side
	CreateMs   pcts               `json:"create_ms"`               // from a create's slot to its return
	DeleteMs   pcts               `json:"delete_ms"`               // from a delete's slot to its return
	Stopped    bool               `json:"stopped_early,omitempty"` // SIGINT/SIGTERM ended the pace
	Seen       int                `json:"seen"`
	Unseen     int                `json:"unseen"` // still pending 10 s after the last op
	Early      int                `json:"seen_before_return"`
	LatencyMs  pcts               `json:"status_ms"`           // from the call returning
	FromSendMs pcts               `json:"status_from_send_ms"` // from the call being sent
	CPUSeconds map[string]float64 `json:"cpu_s"`               // each --pid process, and "client": this one
	// The whole machine over the run: CPU seconds busy (all but idle and
	// iowait, from /proc/stat) of the CPU seconds there were.
	MachineBusy float64 `json:"machine_busy_s"`
	MachineAll  float64 `json:"machine_s"`
	// kube-apiserver over the run: request counts by "VERB resource"
	// (watches included: each is a watch opened), watch events sent by
	// resource, and the watches open at the end by resource.
	Requests    map[string]float64 `json:"apiserver_requests"`
	WatchEvents map[string]float64 `json:"apiserver_watch_events"`
	Watches     map[string]float64 `json:"apiserver_watches_open"`
}

type pcts struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func percentiles(d []time.Duration) pcts {
	q := quantiles(d)
	return pcts{q.P50, q.P99, q.Max}
}

// churnPod: create i of the churn, as /mutate leaves it (its reservation
// uid unique to this churn), or with --as-user as a user writes it.
func churnPod(i int, start time.Time) *corev1.Pod {
	if *asUser {
		return pod0(i)
	}
	p := rewrittenPod(i)
	p.Annotations["gpuquota.io/reservation"] = fmt.Sprintf("%08x-0000-4000-8000-%012d", uint32(start.Unix()), i)
	return p
}

// stopSignal: a channel closed at the first SIGINT or SIGTERM, which ends
// the pace early; what was sent is still reported.
func stopSignal() <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	stop := make(chan struct{})
	go func() { <-sig; close(stop) }()
	return stop
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// usedPods: status.used gpu-memory in pods' worth (each pod asks 1Gi).
func usedPods(u *unstructured.Unstructured) (int, bool) {
	v, ok, _ := unstructured.NestedString(u.Object, "status", "used", "gpu-memory")
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, false
	}
	return int(q.Value() >> 30), true
}

func churn(nss []string) error {
	base, err := restConfig()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	index := map[string]int{}
	for i, n := range nss {
		index[n] = i
	}
	state := make([]nsState, len(nss))
	var mu sync.Mutex // lat, fromSend, early
	var lat, fromSend, calls []time.Duration
	early := 0
	finish := func(s *nsState) { // s.mu held; call returned and watch seen
		l := s.seen.Sub(s.returned)
		if l < 0 {
			l = 0
			early++
		}
		lat = append(lat, l)
		fromSend = append(fromSend, s.seen.Sub(s.sent))
		s.count, s.pending = s.expect, false
	}

	var watchDone sync.WaitGroup
	if *latency {
		dc, err := dynamic.NewForConfig(base)
		if err != nil {
			return err
		}
		l, err := dc.Resource(gpuquotas).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range l.Items {
			if j, ok := index[l.Items[i].GetNamespace()]; ok {
				state[j].count, state[j].known = usedPods(&l.Items[i])
			}
		}
		for i := range state {
			if !state[i].known {
				return fmt.Errorf("namespace %s: no GPUQuota with status.used gpu-memory", nss[i])
			}
		}
		rv := l.GetResourceVersion()
		watchDone.Add(1)
		go func() {
			defer watchDone.Done()
			for ctx.Err() == nil {
				w, err := dc.Resource(gpuquotas).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintln(os.Stderr, "podcreate: watch:", err)
						time.Sleep(100 * time.Millisecond)
					}
					continue
				}
				for ev := range w.ResultChan() {
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok || ev.Type != watch.Modified {
						continue
					}
					rv = u.GetResourceVersion()
					j, ok := index[u.GetNamespace()]
					if !ok {
						continue
					}
					n, ok := usedPods(u)
					now := time.Now()
					s := &state[j]
					s.mu.Lock()
					if ok && s.pending && n == s.expect && s.seen.IsZero() {
						s.seen = now
						if !s.returned.IsZero() {
							mu.Lock()
							finish(s)
							mu.Unlock()
						}
					}
					s.mu.Unlock()
				}
				w.Stop()
			}
		}()
	}

	res := churnResult{Mode: "churn", Run: *runID, TargetRate: *churnRate, Clients: *clients,
		Namespaces: len(nss), CPUSeconds: map[string]float64{}}
	cs := make([]*kubernetes.Clientset, 2**clients)
	for c := range cs {
		if cs[c], err = newClient(base); err != nil {
			return err
		}
		if _, err = cs[c].CoreV1().Namespaces().Get(ctx, nss[0], metav1.GetOptions{}); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	from := *deleteFrom
	if from < 0 {
		from = len(nss) / 2
	}
	ops := int(*churnRate * *churnSecs)
	if from+ops > *fillPods {
		return fmt.Errorf("deleting fill pods %d..%d: the fill made %d", from, from+ops-1, *fillPods)
	}
	var creates, deletes, skipped, errCount atomic.Int64
	var lag maxLag
	var firstMu sync.Mutex
	var bySlot [2][]time.Duration // creates, deletes: from the slot to the call's return
	m0, err := apiMetrics(ctx, cs[0])
	if err != nil {
		return err
	}
	before := map[string]int64{}
	readCPU(before)
	sched := newSchedule(*churnRate, *churnSecs)
	start := sched.start
	// op: the i-th op of kind (0 create, 1 delete) through client c, due at slot.
	op := func(c, kind, i int, slot time.Time) {
		var j, delta int
		var name string
		if kind == 0 {
			j, delta, name = i%len(nss), 1, fmt.Sprintf("%s-%06d", *runID, i)
		} else {
			g := from + i
			j, delta, name = g%len(nss), -1, fmt.Sprintf("%s-%06d", *fillRun, g)
		}
		s := &state[j]
		if *latency {
			s.mu.Lock()
			if s.pending {
				s.mu.Unlock()
				skipped.Add(1)
				return
			}
			s.pending, s.expect = true, s.count+delta
			s.sent, s.returned, s.seen = time.Now(), time.Time{}, time.Time{}
			s.mu.Unlock()
		}
		var err error
		t0 := time.Now()
		if kind == 0 {
			_, err = cs[c].CoreV1().Pods(nss[j]).Create(ctx, churnPod(i, start), metav1.CreateOptions{})
		} else {
			err = cs[c].CoreV1().Pods(nss[j]).Delete(ctx, name, metav1.DeleteOptions{})
		}
		t1 := time.Now()
		mu.Lock()
		calls = append(calls, t1.Sub(t0))
		bySlot[kind] = append(bySlot[kind], t1.Sub(slot))
		mu.Unlock()
		if err != nil {
			errCount.Add(1)
			firstMu.Lock()
			if res.FirstError == "" {
				res.FirstError = err.Error()
			}
			firstMu.Unlock()
		} else if kind == 0 {
			creates.Add(1)
		} else {
			deletes.Add(1)
		}
		if !*latency {
			return
		}
		s.mu.Lock()
		if err != nil { // nothing changed (a delete's NotFound included)
			s.pending = false
		} else if s.returned = t1; !s.seen.IsZero() {
			mu.Lock()
			finish(s)
			mu.Unlock()
		}
		s.mu.Unlock()
	}
	stop := stopSignal()
	var wg sync.WaitGroup
	if *churnOpen {
		for kind := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				openLoop(sched, stop, &lag, func(i int, slot time.Time) { op(2*(i%*clients)+kind, kind, i, slot) })
			}()
		}
	} else {
		var next [2]atomic.Int64
		for c := range cs {
			kind := c % 2 // 0 creates, 1 deletes
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next[kind].Add(1) - 1); i < ops && !closed(stop); i = int(next[kind].Add(1) - 1) {
					lag.note(sleepUntil(sched.slot(i)))
					op(c, kind, i, sched.slot(i))
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := map[string]int64{}
	readCPU(after)
	m1, err := apiMetrics(ctx, cs[0])
	if err != nil {
		return err
	}
	// The stragglers: up to 10 s more for the watch to see them.
	if *latency {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			n := 0
			for j := range state {
				state[j].mu.Lock()
				if state[j].pending {
					n++
				}
				state[j].mu.Unlock()
			}
			if res.Unseen = n; n == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cancel()
	watchDone.Wait()

	for k, v := range after {
		d := float64(v-before[k]) / 100
		switch k {
		case "machine":
			res.MachineAll = d
		case "machine busy":
			res.MachineBusy = d
		default:
			res.CPUSeconds[k] = d
		}
	}
	res.Requests, res.WatchEvents, res.Watches = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for k, v := range m1 {
		kind, key, _ := strings.Cut(k, " ")
		switch kind {
		case "req":
			if d := v - m0[k]; d != 0 {
				res.Requests[key] = d
			}
		case "events":
			if d := v - m0[k]; d != 0 {
				res.WatchEvents[key] = d
			}
		case "watching":
			if v != 0 {
				res.Watches[key] = v
			}
		}
	}
	res.StartUnix, res.Seconds = float64(start.UnixNano())/1e9, elapsed.Seconds()
	res.Creates, res.Deletes, res.Skipped, res.Errors = creates.Load(), deletes.Load(), skipped.Load(), errCount.Load()
	res.CreateRate, res.DeleteRate = float64(res.Creates)/res.Seconds, float64(res.Deletes)/res.Seconds
	res.MaxLagMs = lag.ms()
	res.CreateMs, res.DeleteMs = percentiles(bySlot[0]), percentiles(bySlot[1])
	res.Stopped = closed(stop)
	res.CallMs = percentiles(calls)
	res.Seen, res.Early = len(lat), early
	res.LatencyMs, res.FromSendMs = percentiles(lat), percentiles(fromSend)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// readCPU adds the CPU ticks of every --pid process, of this one
// ("client") and of the machine ("machine busy", "machine") into into.
func readCPU(into map[string]int64) {
	if t, err := cpuTicks(strconv.Itoa(os.Getpid())); err == nil {
		into["client"] += t
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		// cpu  user nice system idle iowait irq softirq steal guest
		// guest_nice (the last two counted in user and nice already)
		line, _, _ := strings.Cut(string(b), "\n")
		for i, f := range strings.Fields(line)[1:] {
			if i >= 8 {
				break
			}
			v, _ := strconv.ParseInt(f, 10, 64)
			into["machine"] += v
			if i != 3 && i != 4 {
				into["machine busy"] += v
			}
		}
	}
	for _, p := range pids {
		name, pid, _ := strings.Cut(p, "=")
		t, err := cpuTicks(pid)
		if err != nil {
			fail(fmt.Sprintf("reading CPU of %s: %v", p, err))
		}
		into[name] += t
	}
}

// apiMetrics: kube-apiserver's request counters by verb and resource (codes
// summed; WATCH included), watch events sent by resource, and the watches
// open now by resource (apiserver_longrunning_requests{verb="WATCH"}).
func apiMetrics(ctx context.Context, c *kubernetes.Clientset) (map[string]float64, error) {
	b, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		var key string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			l := labels(line)
			r := l["resource"]
			if r == "" {
				continue
			}
			if l["subresource"] != "" {
				r += "/" + l["subresource"]
			}
			key = "req " + l["verb"] + " " + r
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			l := labels(line)
			r := l["resource"]
			if r == "" {
				r = l["kind"]
			}
			key = "events " + r
		case strings.HasPrefix(line, "apiserver_longrunning_requests{"):
			l := labels(line)
			if l["verb"] != "WATCH" {
				continue
			}
			key = "watching " + l["resource"]
		default:
			continue
		}
		if v, err := sampleValue(line); err == nil {
			out[key] += v
		}
	}
	return out, nil
}

// metricsMode prints apiMetrics as one JSON object, for a script to take
// differences around something it runs itself.
func metricsMode() error {
	c, err := kubeconfigClient()
	if err != nil {
		return err
	}
	m, err := apiMetrics(context.Background(), c)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}
