package schedule

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"
)

// DefaultMissedGrace is how late a task may still fire (after hookroom was
// down, say) when schedules.missed_grace is not set.
const DefaultMissedGrace = time.Hour

// GiveUpAfter is how long past its grace a firing that cannot be
// delivered (the room is gone, the account was kicked) is retried before
// the runner gives up on it, with an error in the log.
const GiveUpAfter = 24 * time.Hour

// FireFunc carries out a firing: it posts the task's message (or, for a
// missed firing, the notice that it was missed) and returns the event it
// posted ("" when it posted nothing on purpose). It must be idempotent per
// Firing.TxnKey: a firing whose delivery was interrupted is delivered
// again. An error leaves the firing undelivered; the runner tries again
// later while the firing is within the grace.
type FireFunc func(ctx context.Context, f Firing) (id.EventID, error)

// Runner fires due tasks of a Store. Run it in one goroutine per database:
// claims make a second runner harmless, but not useful.
type Runner struct {
	store *Store
	fire  FireFunc
	// Grace returns how late a task may still fire; a task found later
	// than that is reported as missed instead (nil: DefaultMissedGrace).
	// It is read at every use, so a configuration reload changes it.
	Grace func() time.Duration
	// Now is the clock (nil: time.Now). Tests run the runner in a
	// testing/synctest bubble, where time.Now and the runner's timers are
	// the bubble's fake clock, or substitute it.
	Now func() time.Time
	// PollInterval bounds how long the runner sleeps without looking at
	// the store (default 1 minute): a task another process added is seen
	// within it. Wake makes the runner look at once.
	PollInterval time.Duration
	// RetryDelay is how long a failed delivery waits before the next try
	// (default 30 s).
	RetryDelay time.Duration

	wake chan struct{}
}

// NewRunner returns a runner that fires the due tasks of store with fire.
func NewRunner(store *Store, fire FireFunc) *Runner {
	return &Runner{store: store, fire: fire, wake: make(chan struct{}, 1)}
}

// Wake makes a running Run look at the store now (after a task was added
// or cancelled). It never blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) grace() time.Duration {
	if r.Grace != nil {
		if g := r.Grace(); g > 0 {
			return g
		}
	}
	return DefaultMissedGrace
}

// Run fires due tasks until ctx ends. It first delivers the firings a
// previous run claimed but did not deliver, then fires what is due: tasks
// overdue within the grace fire once (a recurring task then goes on from
// its next run after now), older ones are reported as missed.
func (r *Runner) Run(ctx context.Context) error {
	log := zerolog.Ctx(ctx)
	poll := r.PollInterval
	if poll <= 0 {
		poll = time.Minute
	}
	retry := r.RetryDelay
	if retry <= 0 {
		retry = 30 * time.Second
	}
	var retryAt time.Time
	if !r.redeliver(ctx) {
		retryAt = r.now().Add(retry)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if !retryAt.IsZero() && !r.now().Before(retryAt) {
			retryAt = time.Time{}
			if !r.redeliver(ctx) {
				retryAt = r.now().Add(retry)
			}
		}
		if !r.RunDue(ctx) && retryAt.IsZero() {
			retryAt = r.now().Add(retry)
		}
		wait := poll
		next, ok, err := r.store.NextRun(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn().Err(err).Msg("failed to read the next scheduled run; trying again")
			wait = min(wait, retry)
		case ok:
			wait = min(wait, next.Sub(r.now()))
		}
		if !retryAt.IsZero() {
			wait = min(wait, retryAt.Sub(r.now()))
		}
		wait = max(wait, time.Millisecond)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
			timer.Stop() // Go 1.23 timers: no stale tick survives Stop
		case <-timer.C:
		}
	}
}

// RunDue claims and delivers every task due now, once. It reports false
// when a delivery failed (it is tried again later).
func (r *Runner) RunDue(ctx context.Context) bool {
	log := zerolog.Ctx(ctx)
	now := r.now()
	tasks, err := r.store.Due(ctx, now)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn().Err(err).Msg("failed to read the due scheduled tasks")
		}
		return true
	}
	allOK := true
	grace := r.grace()
	for _, t := range tasks {
		due := t.NextRun
		missed := now.Sub(due) > grace
		next := t.Spec.After(due, now)
		ok, err := r.store.Claim(ctx, t, missed, next, now)
		if err != nil {
			log.Warn().Err(err).Str("task", t.ID).Msg("failed to claim a scheduled task")
			continue
		}
		if !ok {
			continue // claimed before: fired already
		}
		t.NextRun = next
		if next.IsZero() {
			t.State = StateDone
		}
		if !r.deliver(ctx, Firing{Task: t, Due: due, Missed: missed}) {
			allOK = false
		}
	}
	return allOK
}

// redeliver delivers the firings claimed before and not delivered. A firing
// that has meanwhile become older than the grace is reported as missed
// instead. It reports false when a delivery failed.
func (r *Runner) redeliver(ctx context.Context) bool {
	firings, err := r.store.Undelivered(ctx)
	if err != nil {
		if ctx.Err() == nil {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to read the undelivered firings")
		}
		return false
	}
	allOK := true
	for _, f := range firings {
		late := r.now().Sub(f.Due)
		if late > r.grace()+GiveUpAfter {
			zerolog.Ctx(ctx).Error().Str("task", f.Task.ID).Time("due", f.Due).Stringer("room_id", f.Task.RoomID).
				Msg("giving up on a scheduled task that could not be delivered for a day")
			if err := r.store.Delivered(ctx, f, "", r.now()); err != nil {
				allOK = false
			}
			continue
		}
		if !f.Missed && late > r.grace() {
			f.Missed = true
		}
		if !r.deliver(ctx, f) {
			allOK = false
		}
	}
	return allOK
}

func (r *Runner) deliver(ctx context.Context, f Firing) bool {
	log := zerolog.Ctx(ctx).With().Str("task", f.Task.ID).Time("due", f.Due).Bool("missed", f.Missed).Logger()
	evID, err := r.fire(ctx, f)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn().Err(err).Msg("failed to deliver a scheduled task; trying again later")
		}
		return false
	}
	if err := r.store.Delivered(ctx, f, evID, r.now()); err != nil {
		log.Warn().Err(err).Msg("failed to mark a scheduled task delivered")
		return false
	}
	return true
}
