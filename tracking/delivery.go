package tracking

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"maunium.net/go/mautrix/id"
)

// RecordDelivery remembers that reply answers source (the first reply
// recorded for a source wins). It is called right after the reply (or
// its placeholder) was posted.
func (s *Store) RecordDelivery(ctx context.Context, room id.RoomID, source, reply id.EventID) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO tracking_delivery (source_event_id, room_id, reply_event_id, created_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (source_event_id) DO NOTHING`, source, room, reply, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to record the reply to %s: %w", source, err)
	}
	return nil
}

// Delivery returns the reply recorded for source, or "" when there is none.
func (s *Store) Delivery(ctx context.Context, source id.EventID) (id.EventID, error) {
	var reply id.EventID
	err := s.db.QueryRow(ctx, `SELECT reply_event_id FROM tracking_delivery WHERE source_event_id = $1`, source).Scan(&reply)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("failed to read the reply to %s: %w", source, err)
	}
	return reply, nil
}
