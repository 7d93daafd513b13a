package matrixio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// EventSink receives everything an account's sync loop sees.
type EventSink interface {
	// HandleSync is called by Account.Run with the events of one sync
	// response, limited-timeline gaps already filled, BEFORE the sync token
	// that acknowledges them is saved. Returning nil acknowledges the batch;
	// the token is then saved and the loop moves on. Returning an error
	// leaves the token unsaved: after a back-off the same range is fetched
	// again and handed over again, possibly with more events. So HandleSync
	// must be idempotent per event id (persist, deduplicate, return).
	//
	// Calls for one account are sequential; different accounts call
	// concurrently. ctx is Run's context: when it is cancelled, return
	// promptly. The batch and its events belong to the sink.
	HandleSync(ctx context.Context, acct id.UserID, batch SyncBatch) error
}

// ReadyNotifier is an optional interface of an EventSink. SyncReady is
// called once per Run, after the first sync response of the run was handed
// over (or found empty) and its token saved: the account has caught up
// with what happened while it was away.
type ReadyNotifier interface {
	SyncReady(ctx context.Context, acct id.UserID)
}

// EventSinkFunc adapts a function to EventSink.
type EventSinkFunc func(ctx context.Context, acct id.UserID, batch SyncBatch) error

// HandleSync calls f.
func (f EventSinkFunc) HandleSync(ctx context.Context, acct id.UserID, batch SyncBatch) error {
	return f(ctx, acct, batch)
}

var _ EventSink = EventSinkFunc(nil)

// SyncBatch is what one sync response delivered to one account.
type SyncBatch struct {
	// Initial is true for the account's first sync ever (no sync token was
	// stored). Its rooms carry the state as it was when hookroom first
	// looked, and its timelines are history: members in it were present
	// before hookroom started, not live joins. An initial batch is handed
	// to the sink even when it is empty; later empty batches are not.
	Initial bool
	// Since is the token the response continues from ("" when Initial).
	Since string
	// NextBatch is the token that is saved once the sink accepts the batch.
	NextBatch string
	// Rooms holds the rooms with events, sorted by room id.
	Rooms []RoomEvents
	// Invites holds the rooms the account was invited to, sorted by room id.
	// Accepting is the sink's decision (Account.AcceptInvite).
	Invites []Invite
}

// Empty reports whether the batch carries no events and no invites.
func (b *SyncBatch) Empty() bool {
	return len(b.Rooms) == 0 && len(b.Invites) == 0
}

// RoomEvents are one room's events in a SyncBatch. Every event has RoomID
// set, its type class set (state or message) and its content parsed where
// mautrix knows the type (unparseable content is left raw, never dropped).
type RoomEvents struct {
	RoomID id.RoomID
	// Membership is event.MembershipJoin for joined rooms and
	// event.MembershipLeave for rooms the account left, was kicked or
	// banned from since the last sync.
	Membership event.Membership
	// State is the room state at the start of Timeline, as far as the
	// server sent it (on an initial sync or a fresh join: the full state;
	// later: state changes that fell outside the timeline).
	State []*event.Event
	// Timeline holds the room's new events in chronological order,
	// including those fetched to fill a limited timeline.
	Timeline []*event.Event
	// Limited is the server's flag on the first sync response: it left out
	// events between the last sync and the timeline it sent. A fresh join
	// (the account's own join is in the timeline) needs no filling.
	Limited bool
	// FilledBy says how a limited timeline was filled: FillResync (complete),
	// FillMessages (completeness unknown, Gap is set), or "" when it was
	// not limited or not filled.
	FilledBy string
	// Backfilled counts the events the fill added at the start of
	// Timeline, beyond what the first sync response carried.
	Backfilled int
	// Gap is true when a limited timeline could not be filled with
	// certainty (more than BackfillLimit events, the re-sync failed, or
	// /messages had to be used): events may be missing. Every gap, filled
	// or not, is logged with its counts.
	Gap bool
}

// Invite is a pending invitation of the account to a room.
type Invite struct {
	RoomID id.RoomID
	// Sender invited the account.
	Sender id.UserID
	// Event is the m.room.member invite event for the account, nil if the
	// server did not include it.
	Event *event.Event
	// State is the stripped room state that came with the invite (name,
	// join rules, creator, …).
	State []*event.Event
}

// ErrAlreadyRunning is returned by Run when the account's sync loop is
// already running.
var ErrAlreadyRunning = errors.New("sync loop already running")

// recentEventsRemembered is how many delivered event ids an account keeps
// in memory to recognise where a backfill reaches known history.
const recentEventsRemembered = 20000

// backfillPageSize is the /messages page size used to fill gaps.
const backfillPageSize = 100

// Run syncs the account until ctx is cancelled, handing every batch to
// sink before saving the sync token that acknowledges it (see EventSink).
// One Run per account at a time; run each account's loop in its own
// goroutine. Failed syncs and sink errors are retried with exponential
// back-off capped by Config.Retry.MaxBackoff (rate limits wait as long as
// the server asks). Run returns nil when ctx is cancelled, and an error
// only when it cannot go on: the access token was revoked
// (mautrix.MUnknownToken; EnsureAccount logs in again), or the store fails
// at start-up.
func (a *Account) Run(ctx context.Context, sink EventSink) error {
	if !a.running.CompareAndSwap(false, true) {
		return fmt.Errorf("failed to start sync of %s: %w", a.userID, ErrAlreadyRunning)
	}
	defer a.running.Store(false)
	log := zerolog.Ctx(ctx).With().Stringer("user_id", a.userID).Logger()
	ctx = log.WithContext(ctx)
	cfg := a.m.cfg

	since, err := a.m.store.LoadNextBatch(ctx, a.userID)
	if err != nil {
		return err
	}
	a.setPosition(since)
	filterID, err := a.ensureFilter(ctx, false)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	log.Info().Bool("initial", since == "").Msg("Sync loop started")
	defer log.Info().Msg("Sync loop stopped")

	backoff := cfg.Retry.InitialBackoff
	failing := false
	ready, notify := sink.(ReadyNotifier)
	// pause waits after a failure; it reports false when ctx ended.
	pause := func(err error, what string) bool {
		wait, named := RetryAfter(err)
		if !named {
			wait = backoff
			backoff = min(backoff*2, cfg.Retry.MaxBackoff)
		}
		log.Warn().Err(err).Dur("retry_in", wait).Msg(what)
		failing = true
		return sleepCtx(ctx, wait) == nil
	}
	first := true
	for ctx.Err() == nil {
		// The first request of a run catches up at once instead of
		// long-polling, so the account is ready as soon as it can be.
		timeout := cfg.SyncTimeout
		if first || failing {
			timeout = 0
		}
		first = false
		resp, err := a.cli().FullSyncRequest(ctx, mautrix.ReqSync{
			Timeout:  int(timeout / time.Millisecond),
			Since:    since,
			FilterID: filterID,
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MMissingToken) {
				return fmt.Errorf("failed to sync %s: access token rejected: %w", a.userID, err)
			}
			if isFilterRejected(err) {
				// The server forgot or refuses our stored filter: make a new one.
				if filterID, err = a.ensureFilter(ctx, true); err != nil {
					if ctx.Err() != nil {
						break
					}
					return err
				}
				continue
			}
			if !pause(err, "Sync request failed") {
				break
			}
			continue
		}

		// Limited timelines are filled before anything of the response is
		// processed: the re-sync that fills them replaces the response.
		resp, fill := a.fillGaps(ctx, resp, since)
		if ctx.Err() != nil {
			break
		}
		if helper := a.cryptoHelper(); helper != nil {
			a.processCrypto(ctx, helper, resp, since)
		}
		batch := a.buildBatch(ctx, resp, since, fill)
		if ctx.Err() != nil {
			break
		}
		a.handleVerification(ctx, resp, &batch) // verify.go
		if batch.Initial || !batch.Empty() {
			if err := sink.HandleSync(ctx, a.userID, batch); err != nil {
				if ctx.Err() != nil {
					break
				}
				if !pause(err, "Event sink refused sync batch; the sync token stays unsaved") {
					break
				}
				continue
			}
		}
		a.rememberBatch(&batch)
		// Save even if ctx was cancelled just now: the sink accepted the batch.
		saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = a.m.store.SaveNextBatch(saveCtx, a.userID, resp.NextBatch)
		cancel()
		if err != nil {
			if !pause(err, "Failed to save sync token; the batch will be handed over again") {
				break
			}
			continue
		}
		since = resp.NextBatch
		a.setPosition(since)
		failing = false
		backoff = cfg.Retry.InitialBackoff
		if notify {
			ready.SyncReady(ctx, a.userID)
			notify = false
		}
	}
	return nil
}

// syncFilter is the filter every sync loop uses: the room timelines with a
// high limit and full state (no lazy-loaded members, so the first sync
// shows who is present); no presence, account data or ephemeral events.
func (a *Account) syncFilter() *mautrix.Filter {
	none := func() *mautrix.FilterPart {
		return &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}}
	}
	return &mautrix.Filter{
		Presence:    none(),
		AccountData: none(),
		Room: &mautrix.RoomFilter{
			Timeline:    &mautrix.FilterPart{Limit: a.m.cfg.TimelineLimit},
			Ephemeral:   none(),
			AccountData: none(),
		},
	}
}

// ensureFilter returns the id of the server-side filter for syncFilter,
// reusing the stored one unless it was made from a different definition or
// recreate is set.
func (a *Account) ensureFilter(ctx context.Context, recreate bool) (string, error) {
	filter := a.syncFilter()
	raw, err := json.Marshal(filter)
	if err != nil {
		return "", fmt.Errorf("failed to marshal sync filter: %w", err)
	}
	hash := hashParts("hookroom.filter.v1", string(raw))
	if !recreate {
		filterID, storedHash, err := a.m.store.loadFilter(ctx, a.userID)
		if err != nil {
			return "", err
		}
		if filterID != "" && storedHash == hash {
			return filterID, nil
		}
	}
	var resp *mautrix.RespCreateFilter
	err = a.do(ctx, "create filter", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().CreateFilter(ctx, filter)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to create sync filter for %s: %w", a.userID, err)
	}
	if err := a.m.store.saveFilter(ctx, a.userID, resp.FilterID, hash); err != nil {
		return "", err
	}
	return resp.FilterID, nil
}

// isFilterRejected reports whether a sync failed because of its filter id.
func isFilterRejected(err error) bool {
	var httpErr mautrix.HTTPError
	if !errors.As(err, &httpErr) || httpErr.Response == nil || httpErr.RespError == nil {
		return false
	}
	status := httpErr.Response.StatusCode
	return (status == http.StatusBadRequest || status == http.StatusNotFound) &&
		strings.Contains(strings.ToLower(httpErr.RespError.Err), "filter")
}

// buildBatch turns a sync response into a SyncBatch and decrypts what it
// can. fill (nil when no timeline was limited) says which rooms' timelines
// fillGaps re-synced; a joined room's timeline that is still limited is
// paged back with /messages and marked as a Gap. Every filled or unfilled
// gap is logged.
func (a *Account) buildBatch(ctx context.Context, resp *mautrix.RespSync, since string, fill *gapFill) SyncBatch {
	batch := SyncBatch{Initial: since == "", Since: since, NextBatch: resp.NextBatch}
	if helper := a.cryptoHelper(); helper != nil {
		defer func() {
			for i := range batch.Rooms {
				a.decryptEvents(ctx, helper, batch.Rooms[i].Timeline)
			}
		}()
	}
	var synced map[id.RoomID]int
	if fill != nil {
		synced = fill.synced
	}
	// gapped reports whether the room's timeline needed filling (in the
	// first response or, still, in the re-sync) and with how many events
	// the first response came.
	gapped := func(roomID id.RoomID, tl mautrix.SyncTimeline) (int, bool, bool) {
		n, wasLimited := synced[roomID]
		still := !batch.Initial && needsFill(tl, a.userID)
		if !wasLimited {
			n = len(tl.Events)
		}
		return n, wasLimited || still, still
	}
	for roomID, room := range resp.Rooms.Join {
		re := RoomEvents{
			RoomID:     roomID,
			Membership: event.MembershipJoin,
			State:      prepareEvents(roomID, room.State.Events, event.SourceJoin|event.SourceState),
			Timeline:   prepareEvents(roomID, room.Timeline.Events, event.SourceJoin|event.SourceTimeline),
			Limited:    room.Timeline.Limited,
		}
		if n, gap, still := gapped(roomID, room.Timeline); gap {
			re.Limited = true
			if still {
				// More than BackfillLimit events, or the re-sync failed:
				// page back, which cannot be verified.
				older, _ := a.backfill(ctx, roomID, room.Timeline.PrevBatch, since, re.Timeline)
				re.Timeline = append(older, re.Timeline...)
				re.FilledBy = FillMessages
				re.Gap = true
			} else {
				re.FilledBy = FillResync
			}
			re.Backfilled = max(0, len(re.Timeline)-n)
			logFill(ctx, &re, n)
		}
		if len(re.State) > 0 || len(re.Timeline) > 0 {
			batch.Rooms = append(batch.Rooms, re)
		}
	}
	for roomID, room := range resp.Rooms.Leave {
		re := RoomEvents{
			RoomID:     roomID,
			Membership: event.MembershipLeave,
			State:      prepareEvents(roomID, room.State.Events, event.SourceLeave|event.SourceState),
			Timeline:   prepareEvents(roomID, room.Timeline.Events, event.SourceLeave|event.SourceTimeline),
			Limited:    room.Timeline.Limited,
		}
		if n, gap, still := gapped(roomID, room.Timeline); gap {
			// A room the account left cannot be paged back reliably: a
			// timeline still limited after the re-sync stays a gap.
			re.Limited = true
			re.Gap = still
			if !still {
				re.FilledBy = FillResync
			}
			re.Backfilled = max(0, len(re.Timeline)-n)
			logFill(ctx, &re, n)
		}
		if len(re.State) > 0 || len(re.Timeline) > 0 {
			batch.Rooms = append(batch.Rooms, re)
		}
	}
	for roomID := range synced {
		_, joined := resp.Rooms.Join[roomID]
		_, left := resp.Rooms.Leave[roomID]
		if !joined && !left {
			zerolog.Ctx(ctx).Warn().Stringer("room_id", roomID).Int("sync_returned", synced[roomID]).
				Msg("A room with a gap in its timeline is missing from the re-sync that should fill it; events may be missing")
		}
	}
	for roomID, room := range resp.Rooms.Invite {
		inv := Invite{RoomID: roomID}
		for _, evt := range prepareEvents(roomID, room.State.Events, event.SourceInvite|event.SourceState) {
			if evt.Type == event.StateMember && evt.GetStateKey() == a.userID.String() {
				inv.Event = evt
				inv.Sender = evt.Sender
			} else {
				inv.State = append(inv.State, evt)
			}
		}
		batch.Invites = append(batch.Invites, inv)
	}
	slices.SortFunc(batch.Rooms, func(x, y RoomEvents) int { return strings.Compare(string(x.RoomID), string(y.RoomID)) })
	slices.SortFunc(batch.Invites, func(x, y Invite) int { return strings.Compare(string(x.RoomID), string(y.RoomID)) })
	return batch
}

// backfill pages back with /messages from prevBatch towards since (the
// previous sync position) and returns the missing events in chronological
// order. It stops at since, at an event it already handed to the sink, or
// at BackfillLimit events; gap reports that the range could not be filled
// completely.
func (a *Account) backfill(ctx context.Context, roomID id.RoomID, prevBatch, since string, timeline []*event.Event) (older []*event.Event, gap bool) {
	log := zerolog.Ctx(ctx).With().Stringer("room_id", roomID).Logger()
	if prevBatch == "" {
		log.Warn().Msg("Limited timeline without prev_batch; events may be missing")
		return nil, true
	}
	limit := a.m.cfg.BackfillLimit
	inTimeline := make(map[id.EventID]struct{}, len(timeline))
	for _, evt := range timeline {
		inTimeline[evt.ID] = struct{}{}
	}
	var newestFirst []*event.Event
	from := prevBatch
	complete := false
	for len(newestFirst) < limit {
		var resp *mautrix.RespMessages
		err := a.do(ctx, "backfill", retryTransient, func(ctx context.Context) (err error) {
			resp, err = a.cli().Messages(ctx, roomID, from, since, mautrix.DirectionBackward, nil, min(backfillPageSize, limit-len(newestFirst)))
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				log.Err(err).Int("fetched", len(newestFirst)).Msg("Failed to fill limited timeline; events may be missing")
			}
			break
		}
		reachedKnown := false
		for _, evt := range resp.Chunk {
			if a.seen.has(evt.ID) {
				reachedKnown = true
				break
			}
			if _, dup := inTimeline[evt.ID]; dup {
				continue
			}
			inTimeline[evt.ID] = struct{}{}
			newestFirst = append(newestFirst, evt)
		}
		if reachedKnown || len(resp.Chunk) == 0 || resp.End == "" || resp.End == from {
			complete = true
			break
		}
		from = resp.End
	}
	slices.Reverse(newestFirst)
	older = prepareEvents(roomID, newestFirst, event.SourceJoin|event.SourceTimeline)
	log.Debug().Int("backfilled", len(older)).Bool("reached_known", complete).Msg("Paged back over a limited timeline")
	return older, !complete
}

// rememberBatch records the batch's event ids as delivered.
func (a *Account) rememberBatch(b *SyncBatch) {
	for i := range b.Rooms {
		for _, evt := range b.Rooms[i].Timeline {
			a.seen.add(evt.ID)
		}
	}
}

// prepareEvents sets room id, type class and source on each event and
// parses known content. Events whose content fails to parse are kept raw.
func prepareEvents(roomID id.RoomID, events []*event.Event, source event.Source) []*event.Event {
	out := make([]*event.Event, 0, len(events))
	for _, evt := range events {
		if evt == nil {
			continue
		}
		evt.RoomID = roomID
		if evt.StateKey != nil {
			evt.Type.Class = event.StateEventType
		} else {
			evt.Type.Class = event.MessageEventType
		}
		evt.Mautrix.EventSource = source
		if evt.Content.Parsed == nil && evt.Content.VeryRaw != nil {
			_ = evt.Content.ParseRaw(evt.Type)
		}
		out = append(out, evt)
	}
	return out
}

// recentSet is a bounded set of event ids; the oldest are forgotten first.
type recentSet struct {
	mu    sync.Mutex
	max   int
	ids   map[id.EventID]struct{}
	order []id.EventID // ring buffer of insertion order
	next  int
}

func newRecentSet(max int) *recentSet {
	return &recentSet{max: max, ids: make(map[id.EventID]struct{}, max)}
}

func (s *recentSet) add(evtID id.EventID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[evtID]; ok {
		return
	}
	if len(s.order) < s.max {
		s.order = append(s.order, evtID)
	} else {
		delete(s.ids, s.order[s.next])
		s.order[s.next] = evtID
		s.next = (s.next + 1) % s.max
	}
	s.ids[evtID] = struct{}{}
}

func (s *recentSet) has(evtID id.EventID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[evtID]
	return ok
}
