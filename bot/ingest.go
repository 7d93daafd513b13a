package bot

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/tracking"
)

// handleSync is every account's EventSink. It runs before the sync token
// that delivered the batch is saved: each event is written to the inbox
// (de-duplicated across accounts) and queued for handling; only then does
// it return, so a crash can never lose an event that was acknowledged.
func (b *Bot) handleSync(ctx context.Context, acct id.UserID, batch matrixio.SyncBatch) error {
	e := b.w().accounts[acct]
	log := zerolog.Ctx(ctx).With().Str("account", string(acct)).Logger()
	if err := b.trackMembers(ctx, batch); err != nil {
		return err
	}
	// Departures before invites: a kick and a new invite in one batch end
	// with the room remembered.
	b.forgetDepartures(ctx, acct, batch)
	for _, inv := range batch.Invites {
		if e.account == nil {
			break // an account a reload just removed; its loop is stopping
		}
		if err := b.handleInvite(ctx, e, inv); err != nil {
			return err
		}
	}
	// An account's first sync ever shows history, not new events: nothing
	// in it is handled (the router's live syncs deliver what is new).
	if !batch.Initial {
		for _, room := range batch.Rooms {
			if room.Gap {
				log.Warn().Stringer("room_id", room.RoomID).Str("method", room.FilledBy).
					Int("fetched", room.Backfilled).Int("events", len(room.Timeline)).
					Msg("sync gap could not be filled completely; some events may be missing")
			}
			fresh, err := b.track.RecordBatch(ctx, acct, sinceOwnInvite(room.Timeline, acct))
			if err != nil {
				return fmt.Errorf("failed to record events of %s: %w", room.RoomID, err)
			}
			// A message redacted before the dispatcher reached it is
			// skipped (the inbox has blanked it already).
			for _, ev := range fresh {
				if target := tracking.RedactionTarget(ev); target != "" {
					b.dispatch.redacted(target)
				}
			}
			for _, ev := range fresh {
				if b.opts.AfterRecord != nil {
					b.opts.AfterRecord(ev)
				}
				b.dispatch.enqueue(ev)
			}
		}
	}
	return nil
}

// sinceOwnInvite returns the part of a room's timeline after acct's latest
// invite to the room. When an account joins a room it was invited to, its
// first timeline there may reach back into the room's past: what was said
// before the invite is history, not a question for hookroom, while what
// came after it (a direct message's first line, sent before the agent
// joined) is answered.
func sinceOwnInvite(timeline []*event.Event, acct id.UserID) []*event.Event {
	for i := len(timeline) - 1; i >= 0; i-- {
		ev := timeline[i]
		if ev.Type == event.StateMember && ev.GetStateKey() == acct.String() &&
			ev.Content.AsMember().Membership == event.MembershipInvite {
			return timeline[i+1:]
		}
	}
	return timeline
}

// syncSink is what every account's sync loop hands its batches to.
type syncSink struct{ b *Bot }

var (
	_ matrixio.EventSink     = syncSink{}
	_ matrixio.ReadyNotifier = syncSink{}
)

func (s syncSink) HandleSync(ctx context.Context, acct id.UserID, batch matrixio.SyncBatch) error {
	return s.b.handleSync(ctx, acct, batch)
}

// SyncReady fires bot:ready once the account caught up.
func (s syncSink) SyncReady(ctx context.Context, acct id.UserID) {
	s.b.markReady(ctx, s.b.w().accounts[acct])
}

// markReady fires bot:ready once per account and run, after its first sync.
func (b *Bot) markReady(ctx context.Context, e entity) {
	b.readyMu.Lock()
	if b.ready[e.account.UserID()] {
		b.readyMu.Unlock()
		return
	}
	b.ready[e.account.UserID()] = true
	b.readyMu.Unlock()
	zerolog.Ctx(ctx).Info().Stringer("account", e.account.UserID()).Msg("account caught up")
	go b.emitLifecycleFor(context.WithoutCancel(ctx), b.w(), botReady, e, "")
}

// dispatcher hands inbox events to the pipeline: one ordered queue per
// room, rooms in parallel. An event is marked handled when its handling
// ends, so events still queued at a crash are replayed on the next start.
// An event redacted before its turn in the queue came is skipped.
type dispatcher struct {
	b        *Bot
	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	queues   map[id.RoomID]chan *event.Event
	replayed map[id.EventID]struct{}
	// redactedIDs are events whose redaction was recorded and is not
	// handled yet: if they are still queued, they are skipped.
	redactedIDs map[id.EventID]struct{}
	// arrived holds when each queued event was queued (its turn's
	// latencies are measured from then).
	arrived map[id.EventID]time.Time
	// busy counts each room's events queued or being handled.
	busy map[id.RoomID]int
	wg   sync.WaitGroup
}

func newDispatcher(b *Bot) *dispatcher {
	return &dispatcher{b: b, queues: map[id.RoomID]chan *event.Event{}, redactedIDs: map[id.EventID]struct{}{},
		arrived: map[id.EventID]time.Time{}, busy: map[id.RoomID]int{}}
}

// idle reports whether every event of room that reached hookroom so far
// has been handled (or handed to its turn).
func (d *dispatcher) idle(room id.RoomID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.busy[room] == 0
}

// redacted notes that target was redacted. handleSync calls it before it
// queues the batch holding the redaction, so target, if it is still
// queued, is skipped.
func (d *dispatcher) redacted(target id.EventID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.redactedIDs[target] = struct{}{}
}

// redactionHandled forgets the note on target: its redaction is being
// handled, so target came through the queue already (it is earlier in the
// room's timeline), skipped or not.
func (d *dispatcher) redactionHandled(target id.EventID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.redactedIDs, target)
}

// skip reports whether ev was redacted before it was handled: redacted in
// the inbox (a replay) or on the homeserver before a sync delivered it, or
// noted by handleSync.
func (d *dispatcher) skip(ev *event.Event) bool {
	if ev.Unsigned.RedactedBecause != nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.redactedIDs[ev.ID]
	delete(d.redactedIDs, ev.ID)
	return ok
}

// replay queues every event that was recorded but not handled before the
// last stop (or crash). It starts the dispatcher.
func (d *dispatcher) replay(ctx context.Context) error {
	d.ctx, d.cancel = context.WithCancel(ctx)
	pending, err := d.b.track.Pending(ctx)
	if err != nil {
		return fmt.Errorf("failed to read unhandled events: %w", err)
	}
	if len(pending) > 0 {
		zerolog.Ctx(ctx).Info().Int("events", len(pending)).Msg("replaying events left unhandled by the last run")
	}
	d.b.ops.metrics.Replayed(len(pending))
	d.mu.Lock()
	d.replayed = make(map[id.EventID]struct{}, len(pending))
	for _, ev := range pending {
		d.replayed[ev.ID] = struct{}{}
	}
	d.mu.Unlock()
	for _, ev := range pending {
		d.enqueue(ev)
	}
	return nil
}

func (d *dispatcher) enqueue(ev *event.Event) {
	d.mu.Lock()
	q, ok := d.queues[ev.RoomID]
	if !ok {
		q = make(chan *event.Event, 4096)
		d.queues[ev.RoomID] = q
		d.wg.Add(1)
		go d.work(q)
	}
	d.arrived[ev.ID] = time.Now()
	d.busy[ev.RoomID]++
	d.mu.Unlock()
	select {
	case q <- ev:
	case <-d.ctx.Done():
		d.done(ev.RoomID)
	}
}

// done counts one event of room as handled.
func (d *dispatcher) done(room id.RoomID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[room]--; d.busy[room] <= 0 {
		delete(d.busy, room)
	}
}

func (d *dispatcher) work(q chan *event.Event) {
	defer d.wg.Done()
	for {
		select {
		case <-d.ctx.Done():
			return
		case ev := <-q:
			d.handle(ev)
		}
	}
}

func (d *dispatcher) handle(ev *event.Event) {
	defer d.done(ev.RoomID)
	ctx := d.ctx
	log := zerolog.Ctx(ctx).With().Stringer("event_id", ev.ID).Stringer("room_id", ev.RoomID).Logger()
	ctx = hooks.WithCorrelationID(turn.WithArrival(log.WithContext(ctx), d.arrival(ev.ID)), string(ev.ID))
	async := false
	func() {
		defer func() {
			if r := recover(); r != nil {
				log.Error().Any("panic", r).Msg("handling an event panicked; it is marked handled so it is not replayed forever")
			}
		}()
		if d.skip(ev) {
			log.Debug().Msg("skipping an event that was redacted before it was handled")
			return
		}
		async = d.b.handleEvent(ctx, ev, d.replaying(ev.ID))
	}()
	if async {
		return // the turn marks it handled when it ends
	}
	if ctx.Err() != nil {
		return // stopping: leave it unhandled, it is replayed on the next start
	}
	if err := d.b.track.MarkHandled(context.WithoutCancel(ctx), ev.ID); err != nil {
		log.Error().Err(err).Msg("failed to mark event handled; it will be replayed")
	}
}

// arrival returns (and forgets) when evID was queued.
func (d *dispatcher) arrival(evID id.EventID) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	at := d.arrived[evID]
	delete(d.arrived, evID)
	return at
}

// replaying reports whether evID came from the last run's unhandled events.
func (d *dispatcher) replaying(evID id.EventID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.replayed[evID]
	return ok
}

// stop ends the workers; queued events stay unhandled in the inbox.
func (d *dispatcher) stop() {
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
}
