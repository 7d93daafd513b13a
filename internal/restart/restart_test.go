package restart

import (
	"testing"
	"time"
)

func TestTrackerCrash(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := Policy{Delay: 100 * time.Millisecond, MaxDelay: time.Second, Limit: 5, Window: time.Minute}
	tests := []struct {
		name    string
		crashes []time.Duration // offsets from t0; the last one is judged
		want    Decision
	}{
		{"first crash", []time.Duration{0}, Decision{Delay: 100 * time.Millisecond, Recent: 1}},
		{"second doubles", []time.Duration{0, time.Second}, Decision{Delay: 200 * time.Millisecond, Recent: 2}},
		{"capped", []time.Duration{0, 1, 2, 3}, Decision{Delay: 800 * time.Millisecond, Recent: 4}},
		{"limit disables", []time.Duration{0, 1, 2, 3, 4}, Decision{Disable: true, Recent: 5}},
		{"old crashes forgotten", []time.Duration{0, 1, 2, 3, 2 * time.Minute}, Decision{Delay: 100 * time.Millisecond, Recent: 1}},
		{"window is sliding", []time.Duration{0, 30 * time.Second, 61 * time.Second}, Decision{Delay: 200 * time.Millisecond, Recent: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(policy)
			var got Decision
			for _, off := range tt.crashes {
				got = tr.Crash(t0.Add(off))
			}
			if got != tt.want {
				t.Errorf("Crash = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMaxDelayCap(t *testing.T) {
	tr := New(Policy{Delay: time.Second, MaxDelay: 3 * time.Second, Limit: 100, Window: time.Hour})
	t0 := time.Now()
	var last Decision
	for i := range 70 { // the shift overflows long before 70
		last = tr.Crash(t0.Add(time.Duration(i)))
		if last.Delay > 3*time.Second || last.Delay <= 0 {
			t.Fatalf("crash %d: delay %v, want in (0, 3s]", i+1, last.Delay)
		}
	}
	if last.Delay != 3*time.Second {
		t.Errorf("delay = %v, want the cap 3s", last.Delay)
	}
}

func TestDefaults(t *testing.T) {
	var tr Tracker
	for i := range 4 {
		if d := tr.Crash(time.Unix(int64(i), 0)); d.Disable {
			t.Fatalf("crash %d disabled; the default limit is 5", i+1)
		}
	}
	if d := tr.Crash(time.Unix(4, 0)); !d.Disable {
		t.Errorf("5th crash within a minute: %+v, want disabled", d)
	}
	tr.Reset()
	if d := tr.Crash(time.Unix(5, 0)); d.Disable || d.Delay != 100*time.Millisecond {
		t.Errorf("after Reset: %+v, want a restart after 100ms", d)
	}
}
