package turn

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/approval"
)

// The turn's deadline does not run while the turn waits for an approval.
func TestTurnClockPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var expired atomic.Bool
		c := startClock(10*time.Minute, func() { expired.Store(true) })
		defer c.stop()
		time.Sleep(4 * time.Minute)
		resume := c.pause()
		time.Sleep(time.Hour) // waiting for a person
		synctest.Wait()
		if expired.Load() {
			t.Fatal("expired while paused")
		}
		inner := c.pause() // pauses nest
		inner()
		resume()
		resume() // idempotent
		time.Sleep(6*time.Minute - time.Second)
		synctest.Wait()
		if expired.Load() {
			t.Fatal("expired before 10 minutes of running time")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !expired.Load() {
			t.Fatal("not expired after 10 minutes of running time")
		}
	})
}

func TestTurnClockStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var expired atomic.Bool
		c := startClock(time.Minute, func() { expired.Store(true) })
		resume := c.pause()
		c.stop()
		resume() // does not restart a stopped clock
		time.Sleep(time.Hour)
		synctest.Wait()
		if expired.Load() {
			t.Fatal("a stopped clock expired")
		}
	})
}

func TestVerdict(t *testing.T) {
	a := approval.Approval{Tool: "shell", ExpiresAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	cases := []struct {
		status   approval.Status
		by       id.UserID
		reason   string
		approved bool
		want     string
	}{
		{approval.Approved, "@alice:x", "", true, ""},
		{approval.Denied, "@alice:x", "not today", false, "@alice:x denied it: not today"},
		{approval.Denied, "", "policy", false, "it was denied: policy"},
		{approval.Denied, "", "", false, "it was denied"},
		{approval.Expired, "", "", false, "nobody approved it before the deadline (03:04:05 UTC), so it was denied"},
		{approval.Cancelled, "", "the turn was stopped", false, "the approval was cancelled"},
	}
	for _, c := range cases {
		a.Status, a.DecidedBy, a.DecisionReason = c.status, c.by, c.reason
		ok, reason, err := verdict(a)
		if err != nil || ok != c.approved || reason != c.want {
			t.Errorf("%s: verdict %v %q %v, want %v %q", c.status, ok, reason, err, c.approved, c.want)
		}
	}
}
