// Open loop: operations on a fixed arrival schedule, op i at start + i/rate,
// each sent at its time whatever the earlier ones are doing (a goroutine
// each, the connections shared round-robin: HTTP/2 carries many calls on
// one), and timed from its scheduled time, so a slow server cannot hold
// back the arrivals that would have seen it slow (no coordinated omission).
//
//	podcreate run --arrival-rate R --seconds S ...   R*S creates at R/s
//	podcreate churn --open-loop ...                   the churn's pace, open
package main

import (
	"flag"
	"sync"
	"sync/atomic"
	"time"
)

var arrivalRate = flag.Float64("arrival-rate", 0,
	"run: open loop, creates per second on a fixed schedule for --seconds (0: closed loop, --pods over --clients, one create in flight each)")

// schedule: n arrivals every step from start.
type schedule struct {
	start time.Time
	step  time.Duration
	n     int
}

func newSchedule(rate, seconds float64) schedule {
	return schedule{start: time.Now().Add(50 * time.Millisecond),
		step: time.Duration(float64(time.Second) / rate), n: int(rate * seconds)}
}

func (s schedule) slot(i int) time.Time { return s.start.Add(time.Duration(i) * s.step) }

// sleepUntil waits for t; returns how late it already was (0 if on time).
func sleepUntil(t time.Time) time.Duration {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
		return 0
	}
	return -time.Until(t)
}

// maxLag: the worst lateness seen, safe from many goroutines.
type maxLag struct{ v atomic.Int64 }

func (m *maxLag) note(d time.Duration) {
	for {
		old := m.v.Load()
		if int64(d) <= old || m.v.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

func (m *maxLag) ms() float64 { return float64(m.v.Load()) / 1e6 }

// openLoop fires fire(i, slot) in a goroutine of its own at each slot of s
// until stop is closed (nil: never), and returns once every fired call has
// returned; lag gets how late the dispatch was. It returns the number fired.
func openLoop(s schedule, stop <-chan struct{}, lag *maxLag, fire func(i int, slot time.Time)) int {
	var wg sync.WaitGroup
	i := 0
	for ; i < s.n; i++ {
		slot := s.slot(i)
		if d := time.Until(slot); d > 0 {
			select {
			case <-stop:
				wg.Wait()
				return i
			case <-time.After(d):
			}
		} else {
			lag.note(-d)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			fire(i, slot)
		}(i)
	}
	wg.Wait()
	return i
}
