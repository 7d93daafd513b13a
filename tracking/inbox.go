package tracking

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Event states in the ledger.
const (
	stateReceived = "received"
	stateHandled  = "handled"
)

var (
	// ErrIncompleteEvent is returned by Record and RecordBatch for an event without an event id
	// or room id: it could be neither deduplicated nor replayed.
	ErrIncompleteEvent = errors.New("event has no event id or room id")
	// ErrNotRecorded is returned by MarkHandled for an event that is not in the ledger.
	ErrNotRecorded = errors.New("event is not in the inbox")
)

const insertEventQuery = `
	INSERT INTO tracking_inbox (event_id, room_id, event_type, sender, origin_ts, seen_by, raw, state, received_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, 'received', $8)
	ON CONFLICT (event_id) DO NOTHING
`

// Record writes ev to the inbox unless an event with the same id is already there (recorded
// through any account). It reports whether ev is new: exactly one of any number of concurrent
// Records of the same event gets true, and only that caller should hand it to the pipeline.
// Call it before acknowledging the sync response that delivered ev.
func (s *Store) Record(ctx context.Context, ev *event.Event, seenBy id.UserID) (isNew bool, err error) {
	if ev == nil || ev.ID == "" || ev.RoomID == "" {
		return false, ErrIncompleteEvent
	}
	if RedactionTarget(ev) != "" {
		fresh, err := s.RecordBatch(ctx, seenBy, []*event.Event{ev})
		return len(fresh) == 1, err
	}
	raw, err := encodeEvent(ev)
	if err != nil {
		return false, fmt.Errorf("failed to encode event %s: %w", ev.ID, err)
	}
	res, err := s.db.Exec(ctx, insertEventQuery,
		ev.ID, ev.RoomID, ev.Type.Type, ev.Sender, ev.Timestamp, seenBy, string(raw), s.now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("failed to record event %s: %w", ev.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("failed to record event %s: %w", ev.ID, err)
	}
	return n == 1, nil
}

// RecordBatch records events (typically one room's timeline from one sync response) in a
// single transaction and returns those that were new, in their original order. Either all
// are recorded or, on error, none. An event that occurs twice in events is new at most once.
//
// A new redaction (m.room.redaction) is applied in the same transaction to the event it
// redacts, if that is in the inbox (see Redact): from then on the inbox holds nothing of its
// content, and Pending returns it marked redacted.
func (s *Store) RecordBatch(ctx context.Context, seenBy id.UserID, events []*event.Event) ([]*event.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	// Keep the first occurrence of each id; the rest can never be new.
	unique := make([]*event.Event, 0, len(events))
	seen := make(map[id.EventID]struct{}, len(events))
	for _, ev := range events {
		if ev == nil || ev.ID == "" || ev.RoomID == "" {
			return nil, ErrIncompleteEvent
		}
		if _, dup := seen[ev.ID]; !dup {
			seen[ev.ID] = struct{}{}
			unique = append(unique, ev)
		}
	}
	inserted := make(map[id.EventID]struct{}, len(unique))
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		clear(inserted)
		for chunk := range slices.Chunk(unique, batchRows) {
			if err := s.insertChunk(ctx, seenBy, chunk, inserted); err != nil {
				return err
			}
			for _, ev := range chunk {
				if _, ok := inserted[ev.ID]; ok && RedactionTarget(ev) != "" {
					if _, err := s.redact(ctx, ev); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to record a batch of %d events: %w", len(events), err)
	}
	fresh := make([]*event.Event, 0, len(inserted))
	for _, ev := range unique {
		if _, ok := inserted[ev.ID]; ok {
			fresh = append(fresh, ev)
		}
	}
	return fresh, nil
}

// batchRows is how many events one INSERT statement carries. Multi-row statements save
// PostgreSQL a round trip per event; they stay small because modernc's SQLite binds
// parameters in time quadratic in their number (100 rows was slower than one row at a time;
// 10-20 rows is about 20 % faster).
const batchRows = 16

// insertChunk inserts events with one multi-row statement and adds the ids that were actually
// inserted (not already present) to inserted.
func (s *Store) insertChunk(ctx context.Context, seenBy id.UserID, events []*event.Event, inserted map[id.EventID]struct{}) error {
	var q strings.Builder
	q.WriteString(`INSERT INTO tracking_inbox (event_id, room_id, event_type, sender, origin_ts, seen_by, raw, state, received_at) VALUES `)
	args := make([]any, 0, len(events)*8)
	now := s.now().UnixMilli()
	for i, ev := range events {
		raw, err := encodeEvent(ev)
		if err != nil {
			return fmt.Errorf("failed to encode event %s: %w", ev.ID, err)
		}
		if i > 0 {
			q.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, 'received', $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
		args = append(args, ev.ID, ev.RoomID, ev.Type.Type, ev.Sender, ev.Timestamp, seenBy, string(raw), now)
	}
	q.WriteString(` ON CONFLICT (event_id) DO NOTHING RETURNING event_id`)
	rows, err := s.db.Query(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var eventID id.EventID
		if err := rows.Scan(&eventID); err != nil {
			return err
		}
		inserted[eventID] = struct{}{}
	}
	return rows.Err()
}

// MarkHandled records that the pipeline has finished with the event: it is not replayed
// after a restart. Marking a handled event again does nothing; an unknown event id gives
// ErrNotRecorded.
func (s *Store) MarkHandled(ctx context.Context, eventID id.EventID) error {
	res, err := s.db.Exec(ctx,
		`UPDATE tracking_inbox SET state = 'handled', handled_at = $2 WHERE event_id = $1 AND state = 'received'`,
		eventID, s.now().UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to mark event %s handled: %w", eventID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("failed to mark event %s handled: %w", eventID, err)
	} else if n == 1 {
		return nil
	}
	var state string
	err = s.db.QueryRow(ctx, `SELECT state FROM tracking_inbox WHERE event_id = $1`, eventID).Scan(&state)
	switch {
	case err == nil:
		return nil // already handled
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("failed to mark event %s handled: %w", eventID, ErrNotRecorded)
	default:
		return fmt.Errorf("failed to mark event %s handled: %w", eventID, err)
	}
}

// Pending returns the recorded events that are not handled yet, in the order they were
// recorded: what to replay at start-up, after a crash or a stop with work in flight. Their
// content is parsed as a sync would have parsed it. An event that was redacted meanwhile
// comes with empty content and Unsigned.RedactedBecause set, as a homeserver serves it.
func (s *Store) Pending(ctx context.Context) ([]*event.Event, error) {
	rows, err := s.db.Query(ctx, `SELECT event_id, raw FROM tracking_inbox WHERE state = 'received' ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("failed to read pending events: %w", err)
	}
	defer rows.Close()
	var pending []*event.Event
	for rows.Next() {
		var eventID, raw string
		if err := rows.Scan(&eventID, &raw); err != nil {
			return nil, fmt.Errorf("failed to read pending events: %w", err)
		}
		ev, err := decodeEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("failed to decode pending event %s: %w", eventID, err)
		}
		pending = append(pending, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to read pending events: %w", err)
	}
	return pending, nil
}

// Backlog counts the events recorded and not handled yet (what Pending
// would return), through the index of pending events.
func (s *Store) Backlog(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM tracking_inbox WHERE state = 'received'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("failed to count pending events: %w", err)
	}
	return n, nil
}

// encodeEvent returns ev as JSON. Content the homeserver sent is stored byte for byte (so a
// replay sees exactly what the sync saw), not re-encoded from its parsed form.
func encodeEvent(ev *event.Event) ([]byte, error) {
	if len(ev.Content.VeryRaw) > 0 {
		cp := *ev
		cp.Content = event.Content{VeryRaw: ev.Content.VeryRaw}
		return json.Marshal(&cp)
	}
	return json.Marshal(ev)
}

// decodeEvent turns a stored event back into what the sync loop had handed over: room
// timeline events have the message or state class, and known content types are parsed.
// Content with a field of the wrong type (a number as a message's body) is kept as the sync
// loop keeps it, raw and partly parsed, for the pipeline to skip: it must not stop a replay.
func decodeEvent(raw string) (*event.Event, error) {
	var ev event.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		return nil, err
	}
	if ev.StateKey != nil {
		ev.Type.Class = event.StateEventType
	} else {
		ev.Type.Class = event.MessageEventType
	}
	_ = ev.Content.ParseRaw(ev.Type)
	return &ev, nil
}

// RedactionTarget returns the event that ev redacts when ev is an m.room.redaction: the
// top-level "redacts" (room versions up to 10) or else the one in the content (room
// version 11 moved it there; homeservers may send both). It returns "" for other events.
// mautrix parses both places but does not reconcile them.
func RedactionTarget(ev *event.Event) id.EventID {
	if ev == nil || ev.Type.Type != event.EventRedaction.Type {
		return ""
	}
	if ev.Redacts != "" {
		return ev.Redacts
	}
	if c, ok := ev.Content.Parsed.(*event.RedactionEventContent); ok && c.Redacts != "" {
		return c.Redacts
	}
	if s, ok := ev.Content.Raw["redacts"].(string); ok {
		return id.EventID(s)
	}
	return ""
}

// Redact applies the redaction event to the event it redacts (RedactionTarget), if that
// event is in the inbox in the same room: its stored content is replaced by an empty object
// and its unsigned data by redacted_because (the redaction). The row stays, so the event is
// still known when a sync delivers it again, and so does its state (handled or not). It
// reports whether an event was redacted; redacting one again changes nothing. RecordBatch
// calls it for every new redaction; call it directly for redactions learnt otherwise.
func (s *Store) Redact(ctx context.Context, redaction *event.Event) (bool, error) {
	ok, err := s.redact(ctx, redaction)
	if err != nil {
		return false, fmt.Errorf("failed to apply redaction %s: %w", redaction.ID, err)
	}
	return ok, nil
}

func (s *Store) redact(ctx context.Context, redaction *event.Event) (bool, error) {
	target := RedactionTarget(redaction)
	if target == "" {
		return false, nil
	}
	var raw string
	err := s.db.QueryRow(ctx, `SELECT raw FROM tracking_inbox WHERE event_id = $1 AND room_id = $2`, target, redaction.RoomID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var ev event.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		return false, fmt.Errorf("failed to decode %s: %w", target, err)
	}
	if ev.Unsigned.RedactedBecause != nil {
		return false, nil
	}
	because := *redaction
	because.Unsigned = event.Unsigned{}
	if len(redaction.Content.VeryRaw) > 0 {
		because.Content = event.Content{VeryRaw: redaction.Content.VeryRaw}
	}
	ev.Content = event.Content{VeryRaw: json.RawMessage("{}")}
	ev.Unsigned = event.Unsigned{RedactedBecause: &because}
	blanked, err := json.Marshal(&ev)
	if err != nil {
		return false, fmt.Errorf("failed to encode %s: %w", target, err)
	}
	if _, err := s.db.Exec(ctx, `UPDATE tracking_inbox SET raw = $2 WHERE event_id = $1`, target, string(blanked)); err != nil {
		return false, err
	}
	return true, nil
}

// Prune deletes handled events that were handled more than olderThan ago and returns how
// many it deleted. Unhandled events are never pruned. A pruned event that a sync delivers
// again counts as new, so olderThan must exceed the longest time an event can be
// re-delivered (days, not minutes).
func (s *Store) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	cutoff := s.now().Add(-olderThan).UnixMilli()
	res, err := s.db.Exec(ctx, `DELETE FROM tracking_inbox WHERE state = 'handled' AND handled_at < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("failed to prune handled events: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("failed to prune handled events: %w", err)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM tracking_delivery WHERE created_at < $1`, cutoff); err != nil {
		return n, fmt.Errorf("failed to prune delivery records: %w", err)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM tracking_delivery_intent WHERE created_at < $1`, cutoff); err != nil {
		return n, fmt.Errorf("failed to prune delivery intents: %w", err)
	}
	return n, nil
}
