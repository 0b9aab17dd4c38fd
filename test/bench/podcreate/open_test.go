// go test in test/bench/podcreate: the open loop's own properties.

package main

import (
	"sync/atomic"
	"testing"
	"time"
)

// A slow call must not hold back the arrivals after it: that is what makes
// the loop open.
func TestOpenLoopDoesNotWaitForSlowCalls(t *testing.T) {
	s := schedule{start: time.Now(), step: 5 * time.Millisecond, n: 20}
	var lag maxLag
	var fired atomic.Int64
	late := make([]time.Duration, s.n)
	begin := time.Now()
	n := openLoop(s, nil, &lag, func(i int, slot time.Time) {
		late[i] = time.Since(slot)
		fired.Add(1)
		if i == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	})
	if n != s.n || fired.Load() != int64(s.n) {
		t.Fatalf("fired %d (returned %d), want %d", fired.Load(), n, s.n)
	}
	for i, d := range late[1:] {
		if d > 50*time.Millisecond {
			t.Errorf("arrival %d sent %v after its slot: held back by the slow first call", i+1, d)
		}
	}
	if took := time.Since(begin); took < 200*time.Millisecond {
		t.Errorf("returned after %v, before the slow call ended", took)
	}
}

// A closed stop channel ends the schedule early; what was fired is counted.
func TestOpenLoopStops(t *testing.T) {
	s := schedule{start: time.Now(), step: 10 * time.Millisecond, n: 1000}
	stop := make(chan struct{})
	var lag maxLag
	go func() { time.Sleep(55 * time.Millisecond); close(stop) }()
	n := openLoop(s, stop, &lag, func(int, time.Time) {})
	if n < 3 || n > 10 {
		t.Fatalf("fired %d before the stop at ~55 ms of 10 ms steps", n)
	}
	if !closed(stop) {
		t.Fatal("closed() says a closed channel is open")
	}
}

// A slot already past counts as dispatch lag.
func TestOpenLoopNotesLag(t *testing.T) {
	s := schedule{start: time.Now().Add(-100 * time.Millisecond), step: time.Millisecond, n: 1}
	var lag maxLag
	openLoop(s, nil, &lag, func(int, time.Time) {})
	if lag.ms() < 100 {
		t.Fatalf("lag %.1f ms, want >= 100", lag.ms())
	}
}

func TestSlowest(t *testing.T) {
	s := schedule{start: time.Now(), step: 100 * time.Millisecond, n: 4}
	lat := []time.Duration{3, 9, 1, 5}
	got := slowest(lat, s, 2)
	if len(got) != 2 || got[0] != 0.1 || got[1] != 0.3 {
		t.Fatalf("slowest = %v, want [0.1 0.3]", got)
	}
	if len(slowest(nil, s, 5)) != 0 {
		t.Fatal("slowest of nothing is not empty")
	}
}
