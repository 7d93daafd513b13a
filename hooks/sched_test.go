package hooks

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// The shared scheduler wakes every registered waiter at or after its
// time, in order, and never one that was cancelled.
func TestDeadlineScheduler(t *testing.T) {
	const n = 200
	ws := make([]*waiter, n)
	start := time.Now()
	now := clock()
	whens := make([]time.Duration, n)
	var latest time.Duration
	// Queue everyone far in the future, then bring the ones that stay
	// close (an update in the heap) and cancel every third.
	for i := range ws {
		ws[i] = &waiter{}
		ws[i].init(now)
		ws[i].wakeAt(now, time.Hour+time.Duration(i))
	}
	for i := range ws {
		if i%3 == 0 {
			ws[i].cancel()
			continue
		}
		whens[i] = time.Duration(rand.IntN(40)) * time.Millisecond
		latest = max(latest, whens[i])
		ws[i].wakeAt(now, whens[i])
	}
	for i, w := range ws {
		if i%3 == 0 {
			continue
		}
		select {
		case <-w.sig:
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d (due after %v) was never woken", i, whens[i])
		}
		if got := time.Since(start); got < whens[i] {
			t.Errorf("waiter %d woken after %v, before its time %v", i, got, whens[i])
		}
	}
	// A barrier due after every cancelled waiter's time: once it fired,
	// any cancelled waiter would have fired before it.
	barrier := &waiter{}
	barrier.init(now)
	barrier.wakeAt(now, latest+time.Millisecond)
	<-barrier.sig
	for i := 0; i < n; i += 3 {
		select {
		case <-ws[i].sig:
			t.Errorf("cancelled waiter %d was woken", i)
		default:
		}
	}
	deadlines.mu.Lock()
	defer deadlines.mu.Unlock()
	for _, w := range deadlines.q {
		for _, mine := range ws {
			if w == mine {
				t.Errorf("waiter left in the scheduler's queue")
			}
		}
	}
}

// Inside a synctest bubble the waiter uses a timer of its own (fake time);
// outside it uses the shared scheduler.
func TestWaiterDetectsBubble(t *testing.T) {
	var w waiter
	w.init(clock())
	if w.bubble {
		t.Error("real clock taken for a synctest bubble")
	}
	w.recycle()
	synctest.Test(t, func(t *testing.T) {
		var b waiter
		start := clock()
		b.init(start)
		if !b.bubble {
			t.Fatal("bubble clock not recognised")
		}
		// Instants advance with the bubble's time, and a deadline made of
		// one is the bubble's time.
		time.Sleep(time.Second)
		if d := clock().sub(start); d != time.Second {
			t.Errorf("a second of bubble time measured as %v", d)
		}
		if got, want := start.add(time.Second).time(), time.Now(); !got.Equal(want) {
			t.Errorf("instant as time = %v, want the bubble's %v", got, want)
		}
	})
}

type pingTask struct{ w *waiter }

func (p pingTask) run() { p.w.notify() }

// BenchmarkHandoff is the floor of an emission of ordinary hooks: hand a
// task to a pooled worker and sleep until it wakes the emitter, with and
// without a deadline registration. An ordinary hook cannot cost less.
func BenchmarkHandoff(b *testing.B) {
	for _, withDeadline := range []bool{false, true} {
		b.Run(map[bool]string{false: "worker", true: "worker+deadline"}[withDeadline], func(b *testing.B) {
			b.ReportAllocs()
			var w waiter
			w.init(clock())
			t := pingTask{&w}
			for b.Loop() {
				if withDeadline {
					w.wakeAt(clock(), time.Second)
				}
				w.start(t)
				<-w.sig
				if withDeadline {
					w.cancel()
				}
			}
		})
	}
}
