package policy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestLimiterTokenBucket(t *testing.T) {
	l := NewLimiter(Rate{PerMinute: 5, Burst: 5}, 0)
	for i := range 5 {
		if ok, _ := l.Allow(t0, "alice"); !ok {
			t.Fatalf("message %d of the burst refused", i+1)
		}
	}
	ok, retry := l.Allow(t0, "alice")
	if ok || retry != 12*time.Second {
		t.Fatalf("6th message: %v, retry %s; want refused, 12s", ok, retry)
	}
	if ok, _ := l.Allow(t0, "bob"); !ok {
		t.Error("bob refused because of alice")
	}
	if ok, retry := l.Allow(t0.Add(11*time.Second), "alice"); ok || retry != time.Second {
		t.Errorf("after 11 s: %v, retry %s; want refused, 1s", ok, retry)
	}
	if ok, _ := l.Allow(t0.Add(12*time.Second), "alice"); !ok {
		t.Error("after 12 s: refused, want one token back")
	}
	if ok, _ := l.Allow(t0.Add(12*time.Second), "alice"); ok {
		t.Error("a second message after 12 s allowed")
	}
	// A clock that goes back refills nothing and breaks nothing.
	if ok, retry := l.Allow(t0, "alice"); ok || retry <= 0 {
		t.Errorf("with the clock back: %v, %s", ok, retry)
	}
	// A long pause refills up to the burst, not beyond.
	later := t0.Add(time.Hour)
	for i := range 5 {
		if ok, _ := l.Allow(later, "alice"); !ok {
			t.Fatalf("after an hour, message %d refused", i+1)
		}
	}
	if ok, _ := l.Allow(later, "alice"); ok {
		t.Error("after an hour, more than the burst allowed")
	}
	if ok, retry := NewLimiter(Rate{}, 0).Allow(t0, "x"); !ok || retry != 0 {
		t.Error("a limiter without a rate refused")
	}
}

func TestLimiterDefaultBurstAndFractionalRate(t *testing.T) {
	l := NewLimiter(Rate{PerMinute: 0.5}, 0) // one every two minutes, burst 1
	if ok, _ := l.Allow(t0, "k"); !ok {
		t.Fatal("first message refused")
	}
	if ok, retry := l.Allow(t0, "k"); ok || retry != 2*time.Minute {
		t.Errorf("second: %v, %s; want refused, 2m", ok, retry)
	}
	l = NewLimiter(Rate{PerMinute: 2.5}, 0) // burst 3
	n := 0
	for range 10 {
		if ok, _ := l.Allow(t0, "k"); ok {
			n++
		}
	}
	if n != 3 {
		t.Errorf("burst of 2.5 a minute = %d, want 3", n)
	}
}

// Idle buckets that are full again are dropped; past maxBuckets the least
// recently used goes.
func TestLimiterBoundedMemory(t *testing.T) {
	l := NewLimiter(Rate{PerMinute: 60, Burst: 2}, 3)
	for i, key := range []string{"a", "b", "c", "d", "e"} {
		l.Allow(t0.Add(time.Duration(i)*time.Millisecond), key)
	}
	if n := l.Len(); n != 3 {
		t.Errorf("Len = %d with max 3", n)
	}
	// One second later every bucket holds 2 tokens again: a new key's
	// Allow drops them all (but its own).
	l.Allow(t0.Add(2*time.Second), "f")
	if n := l.Len(); n != 1 {
		t.Errorf("Len after the buckets refilled = %d, want 1", n)
	}
	// A bucket still short of tokens is kept.
	l = NewLimiter(Rate{PerMinute: 1, Burst: 2}, 10)
	l.Allow(t0, "slow")
	l.Allow(t0.Add(10*time.Second), "other")
	if n := l.Len(); n != 2 {
		t.Errorf("Len = %d, want 2 (slow is not full again)", n)
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l := NewLimiter(Rate{PerMinute: 1, Burst: 10}, 0)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if ok, _ := l.Allow(t0, "k"); ok {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 10 {
		t.Errorf("%d of 100 concurrent messages allowed with a burst of 10", n)
	}
}

// The 6th message in a minute is refused with a notice; the clock is
// synctest's.
func TestLimitsPerPersonWithSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := NewLimits(RateLimits{PerPerson: Rate{PerMinute: 5}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if v := l.Allow(time.Now(), "coder", "@alice:x.org", general); !v.OK {
				t.Fatalf("message %d refused: %+v", i+1, v)
			}
			time.Sleep(time.Second)
		}
		v := l.Allow(time.Now(), "coder", "@alice:x.org", general)
		if v.OK || v.Scope != ScopePerson || v.Agent != "" || !v.First || v.RetryAfter != 7*time.Second {
			t.Fatalf("6th message: %+v; want refused by the person limit, first, retry 7s", v)
		}
		if got, want := v.Notice(), "You're sending messages faster than hookroom allows for one person (5 a minute). Please try again in 7 s."; got != want {
			t.Errorf("Notice = %q, want %q", got, want)
		}
		if v := l.Allow(time.Now(), "coder", "@alice:x.org", general); v.OK || v.First {
			t.Errorf("7th message at once: %+v; want refused, not first (no second notice)", v)
		}
		time.Sleep(v.RetryAfter)
		if v := l.Allow(time.Now(), "coder", "@alice:x.org", general); !v.OK {
			t.Errorf("after the wait: %+v", v)
		}
		if v := l.Allow(time.Now(), "coder", "@alice:x.org", general); v.OK || !v.First {
			t.Errorf("refused again after an allowed one: %+v; want first again", v)
		}
		s := l.Stats()
		if s.Allowed != 6 || s.LimitedPerson != 3 || s.LimitedRoom != 0 || s.Buckets != 1 {
			t.Errorf("Stats = %+v", s)
		}
	})
}

// Every bucket that applies must have a token, and a refused message takes
// none from any.
func TestLimitsAllOrNothing(t *testing.T) {
	l, err := NewLimits(RateLimits{PerPerson: Rate{PerMinute: 1, Burst: 2}, PerRoom: Rate{PerMinute: 1, Burst: 1}})
	if err != nil {
		t.Fatal(err)
	}
	const alice id.UserID = "@alice:x.org"
	if v := l.Allow(t0, "a", alice, "!r1:x.org"); !v.OK {
		t.Fatalf("first: %+v", v)
	}
	v := l.Allow(t0, "a", alice, "!r1:x.org")
	if v.OK || v.Scope != ScopeRoom || v.RetryAfter != time.Minute {
		t.Fatalf("second in r1: %+v; want refused by the room", v)
	}
	if got, want := v.Notice(), "This room is sending messages faster than hookroom allows (1 a minute). Please try again in 60 s."; got != want {
		t.Errorf("Notice = %q, want %q", got, want)
	}
	// The refusal took no token of alice's: she has one left for r2.
	if v := l.Allow(t0, "a", alice, "!r2:x.org"); !v.OK {
		t.Fatalf("in r2: %+v; the refused message took alice's token", v)
	}
	if v := l.Allow(t0, "a", alice, "!r3:x.org"); v.OK || v.Scope != ScopePerson {
		t.Fatalf("in r3: %+v; want refused by alice's limit", v)
	}
	// Both limits refuse: the verdict names the one that frees up last.
	l, _ = NewLimits(RateLimits{PerPerson: Rate{PerMinute: 1, Burst: 1}, PerRoom: Rate{PerMinute: 0.5, Burst: 1}})
	l.Allow(t0, "a", alice, general)
	if v := l.Allow(t0, "a", alice, general); v.OK || v.Scope != ScopeRoom || v.RetryAfter != 2*time.Minute || !v.First {
		t.Errorf("both refuse: %+v; want the room's 2m", v)
	}
}

// An agent's own limits apply besides the global ones, in buckets of
// their own.
func TestLimitsPerAgent(t *testing.T) {
	l, err := NewLimits(RateLimits{
		PerPerson: Rate{PerMinute: 10},
		Agents: map[hooks.AgentName]AgentRateLimits{
			"coder": {PerPerson: Rate{PerMinute: 2}},
			"quiet": {PerRoom: Rate{PerMinute: 1}},
			"free":  {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const alice id.UserID = "@alice:x.org"
	for i := range 2 {
		if v := l.Allow(t0, "coder", alice, general); !v.OK {
			t.Fatalf("coder %d: %+v", i, v)
		}
	}
	v := l.Allow(t0, "coder", alice, general)
	if v.OK || v.Scope != ScopePerson || v.Agent != "coder" || v.RetryAfter != 30*time.Second {
		t.Fatalf("3rd to coder: %+v", v)
	}
	if got, want := v.Notice(), "You're sending messages to coder faster than hookroom allows for one person (2 a minute). Please try again in 30 s."; got != want {
		t.Errorf("Notice = %q, want %q", got, want)
	}
	// Other agents only see the global limit, which counted coder's two.
	for i := range 8 {
		if v := l.Allow(t0, "assistant", alice, general); !v.OK {
			t.Fatalf("assistant %d: %+v", i, v)
		}
	}
	if v := l.Allow(t0, "assistant", alice, general); v.OK || v.Agent != "" {
		t.Errorf("11th message: %+v; want the global limit", v)
	}
	if v := l.Allow(t0, "quiet", "@bob:x.org", lab); !v.OK {
		t.Fatalf("quiet: %+v", v)
	}
	v = l.Allow(t0, "quiet", "@carol:x.org", lab)
	if v.OK || v.Scope != ScopeRoom || v.Agent != "quiet" {
		t.Fatalf("quiet's room limit: %+v", v)
	}
	if got, want := v.Notice(), "This room is sending messages to quiet faster than hookroom allows (1 a minute). Please try again in 60 s."; got != want {
		t.Errorf("Notice = %q, want %q", got, want)
	}
	if s := l.Stats(); s.LimitedPerson != 2 || s.LimitedRoom != 1 || s.Allowed != 11 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestLimitsNothingToLimit(t *testing.T) {
	l, err := NewLimits(RateLimits{})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if v := l.Allow(t0, "a", "@a:x.org", general); !v.OK || v.Notice() != "" {
			t.Fatalf("the zero RateLimits refused: %+v", v)
		}
	}
	if s := l.Stats(); s.Buckets != 0 || s.Allowed != 1000 {
		t.Errorf("Stats = %+v", s)
	}
	var none *Limits
	if v := none.Allow(t0, "a", "@a:x.org", general); !v.OK || none.Stats() != (LimitStats{}) {
		t.Error("a nil *Limits refused")
	}
}

func TestLimitsEvictionCounted(t *testing.T) {
	l, _ := NewLimits(RateLimits{PerPerson: Rate{PerMinute: 1}, MaxBuckets: 2})
	for i := range 5 {
		l.Allow(t0, "a", id.UserID(fmt.Sprintf("@u%d:x.org", i)), general)
	}
	if s := l.Stats(); s.Buckets != 2 || s.Evicted != 3 {
		t.Errorf("Stats = %+v; want 2 buckets, 3 evicted", s)
	}
}

func TestNoticeTexts(t *testing.T) {
	tests := []struct {
		v    Verdict
		want string
	}{
		{Verdict{OK: true}, ""},
		{Verdict{Scope: ScopePerson, Rate: Rate{PerMinute: 5, Burst: 10}, RetryAfter: 20 * time.Second},
			"You're sending messages faster than hookroom allows for one person (5 a minute, 10 at once). Please try again in 20 s."},
		{Verdict{Scope: ScopePerson, Rate: Rate{PerMinute: 0.5}, RetryAfter: 1500 * time.Millisecond},
			"You're sending messages faster than hookroom allows for one person (1 every 2 minutes). Please try again in 2 s."},
		{Verdict{Scope: ScopeRoom, Rate: Rate{PerMinute: 0.4}, RetryAfter: 150 * time.Second},
			"This room is sending messages faster than hookroom allows (1 every 2.5 minutes). Please try again in 3 min."},
		{Verdict{Scope: ScopeRoom, Rate: Rate{PerMinute: 1.5}, RetryAfter: time.Millisecond},
			"This room is sending messages faster than hookroom allows (1.5 a minute). Please try again in 1 s."},
		{Verdict{Scope: ScopeRoom, Rate: Rate{PerMinute: 1.0 / 90}, RetryAfter: 90 * time.Minute},
			"This room is sending messages faster than hookroom allows (1 every 90 minutes). Please try again in 1 h 30 min."},
		{Verdict{Scope: ScopeRoom, Rate: Rate{PerMinute: 1.0 / 120}, RetryAfter: 2 * time.Hour},
			"This room is sending messages faster than hookroom allows (1 every 120 minutes). Please try again in 2 h."},
	}
	for _, tt := range tests {
		if got := tt.v.Notice(); got != tt.want {
			t.Errorf("Notice(%+v) =\n %q, want\n %q", tt.v, got, tt.want)
		}
	}
}
