package bot

import (
	"testing"
	"testing/synctest"
	"time"
)

// A reaction on a card that is sent but not recorded yet waits for the
// record; with no card being posted in the room it does not wait.
func TestWaitPostedWaitsForTheCardRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w approvalWaiters
		if w.waitPosted(t.Context(), "!r:x", time.Minute) {
			t.Fatal("waited with no card being posted")
		}
		done := w.startPosting("!r:x")
		other := w.startPosting("!other:x")
		res := make(chan bool, 1)
		go func() { res <- w.waitPosted(t.Context(), "!r:x", time.Minute) }()
		other() // a card of another room is recorded: still waiting
		synctest.Wait()
		select {
		case <-res:
			t.Fatal("returned before the card was recorded")
		default:
		}
		done()
		if !<-res {
			t.Error("waitPosted = false after waiting for the card")
		}
		// The limit ends the wait when a card never gets recorded.
		w.startPosting("!r:x")
		start := time.Now()
		if !w.waitPosted(t.Context(), "!r:x", 10*time.Second) || time.Since(start) != 10*time.Second {
			t.Errorf("waited %v, want the 10s limit", time.Since(start))
		}
	})
}
