package restart

import (
	"time"
)

// Policy tunes restarts. Zero fields take the defaults named on each.
type Policy struct {
	// Delay is the wait before the first restart after a crash; it doubles
	// with every further crash within Window (default 100 ms), up to
	// MaxDelay (default 30 s).
	Delay    time.Duration
	MaxDelay time.Duration
	// Limit crashes within Window disable the process (defaults 5 and 1
	// minute).
	Limit  int
	Window time.Duration
}

// WithDefaults returns p with its zero fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	if p.Delay <= 0 {
		p.Delay = 100 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	if p.Limit <= 0 {
		p.Limit = 5
	}
	if p.Window <= 0 {
		p.Window = time.Minute
	}
	return p
}

// Decision is what to do after a crash.
type Decision struct {
	// Disable is set when the crash reached the limit: do not restart.
	Disable bool
	// Delay is the wait before the restart (0 when Disable is set).
	Delay time.Duration
	// Recent is the number of crashes within the window, this one
	// included.
	Recent int
}

// Tracker remembers the recent crashes of one process. The zero value uses
// the default policy; it is not safe for concurrent use (supervisors call
// it under their own lock).
type Tracker struct {
	Policy  Policy
	crashes []time.Time
}

// New returns a tracker for policy (zero fields: defaults).
func New(policy Policy) *Tracker { return &Tracker{Policy: policy} }

// Crash records a crash at now and decides what follows: a restart after
// Delay (Delay << (recent crashes - 1), capped at MaxDelay), or, at Limit
// crashes within Window, disabling the process.
func (t *Tracker) Crash(now time.Time) Decision {
	p := t.Policy.WithDefaults()
	recent := t.crashes[:0]
	for _, c := range t.crashes {
		if now.Sub(c) < p.Window {
			recent = append(recent, c)
		}
	}
	t.crashes = append(recent, now)
	n := len(t.crashes)
	if n >= p.Limit {
		return Decision{Disable: true, Recent: n}
	}
	delay := p.Delay << (n - 1)
	if delay > p.MaxDelay || delay <= 0 {
		delay = p.MaxDelay
	}
	return Decision{Delay: delay, Recent: n}
}

// Reset forgets the recorded crashes (after a reload re-enabled the
// process, say).
func (t *Tracker) Reset() { t.crashes = nil }
