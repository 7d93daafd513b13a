package tracking

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"maunium.net/go/mautrix/id"
)

// Reply is one message hookroom posted in answer to a source event.
type Reply struct {
	// Part numbers the messages of one answer: 0 is the placeholder or the
	// first message, 1, 2, … the rest of an answer too long for one event.
	Part    int
	EventID id.EventID
	// Sender is the account that posted it ("" when not known: recorded
	// before hookroom kept it).
	Sender id.UserID
}

// RecordDelivery remembers that reply is the first message answering
// source (RecordReply with part 0 and no sender).
func (s *Store) RecordDelivery(ctx context.Context, room id.RoomID, source, reply id.EventID) error {
	return s.RecordReply(ctx, room, source, Reply{EventID: reply})
}

// RecordReply remembers that r answers source (the first reply recorded
// for a source and part wins). It is called right after the message was
// posted.
func (s *Store) RecordReply(ctx context.Context, room id.RoomID, source id.EventID, r Reply) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO tracking_delivery (source_event_id, part, room_id, sender, reply_event_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (source_event_id, part) DO NOTHING`, source, r.Part, room, r.Sender, r.EventID, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to record the reply to %s: %w", source, err)
	}
	return nil
}

// Delivery returns the first reply (part 0) recorded for source, or ""
// when there is none.
func (s *Store) Delivery(ctx context.Context, source id.EventID) (id.EventID, error) {
	var reply id.EventID
	err := s.db.QueryRow(ctx, `SELECT reply_event_id FROM tracking_delivery WHERE source_event_id = $1 AND part = 0`, source).Scan(&reply)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("failed to read the reply to %s: %w", source, err)
	}
	return reply, nil
}

// Replies returns every reply recorded for source, in part order.
func (s *Store) Replies(ctx context.Context, source id.EventID) ([]Reply, error) {
	rows, err := s.db.Query(ctx, `
		SELECT part, reply_event_id, sender FROM tracking_delivery
		WHERE source_event_id = $1 ORDER BY part`, source)
	if err != nil {
		return nil, fmt.Errorf("failed to read the replies to %s: %w", source, err)
	}
	defer rows.Close()
	var out []Reply
	for rows.Next() {
		var r Reply
		if err := rows.Scan(&r.Part, &r.EventID, &r.Sender); err != nil {
			return nil, fmt.Errorf("failed to read the replies to %s: %w", source, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to read the replies to %s: %w", source, err)
	}
	return out, nil
}
