package tracking

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
	// TxnKey and Run name the intent (IntendReply) the message confirms:
	// when TxnKey is set, RecordReply deletes that intent in the same
	// transaction.
	TxnKey, Run string
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
	const insert = `
		INSERT INTO tracking_delivery (source_event_id, part, room_id, sender, reply_event_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (source_event_id, part) DO NOTHING`
	now := s.now().UnixMilli()
	var err error
	if r.TxnKey == "" {
		_, err = s.db.Exec(ctx, insert, source, r.Part, room, r.Sender, r.EventID, now)
	} else {
		err = s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
			if _, err := s.db.Exec(ctx, insert, source, r.Part, room, r.Sender, r.EventID, now); err != nil {
				return err
			}
			_, err := s.db.Exec(ctx, `DELETE FROM tracking_delivery_intent WHERE source_event_id = $1 AND txn_key = $2 AND run_key = $3`, source, r.TxnKey, r.Run)
			return err
		})
	}
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

// Intent is a message about to be posted in answer to a source event,
// recorded before the send (IntendReply) and deleted when its event id is
// recorded (RecordReply with the same TxnKey and Run) or ForgetIntent.
type Intent struct {
	Room id.RoomID
	// Part is the part of the answer it will be (as Reply.Part).
	Part int
	// TxnKey is the transaction key it is sent with.
	TxnKey string
	// Run names the run of the turn that sends it: several runs may send
	// with one transaction key.
	Run string
	// Sender is the account that sends it.
	Sender id.UserID
	// Since is the sender's sync position before the send: the message,
	// if it was posted, comes after it in the sender's sync.
	Since string
}

// IntendReply records that in is about to be sent in answer to source. An
// intent already recorded for the same key and run stays as it was (its
// older sync position covers the new send too).
func (s *Store) IntendReply(ctx context.Context, source id.EventID, in Intent) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO tracking_delivery_intent (source_event_id, txn_key, run_key, part, room_id, sender, since, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (source_event_id, txn_key, run_key) DO NOTHING`,
		source, in.TxnKey, in.Run, in.Part, in.Room, in.Sender, in.Since, s.now().UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to record the intent to answer %s: %w", source, err)
	}
	return nil
}

// Intents returns the intents recorded for source (by every run) that were
// neither confirmed nor forgotten, oldest first.
func (s *Store) Intents(ctx context.Context, source id.EventID) ([]Intent, error) {
	rows, err := s.db.Query(ctx, `
		SELECT room_id, part, txn_key, run_key, sender, since FROM tracking_delivery_intent
		WHERE source_event_id = $1 ORDER BY created_at, part, txn_key, run_key`, source)
	if err != nil {
		return nil, fmt.Errorf("failed to read the intents to answer %s: %w", source, err)
	}
	defer rows.Close()
	var out []Intent
	for rows.Next() {
		var in Intent
		if err := rows.Scan(&in.Room, &in.Part, &in.TxnKey, &in.Run, &in.Sender, &in.Since); err != nil {
			return nil, fmt.Errorf("failed to read the intents to answer %s: %w", source, err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to read the intents to answer %s: %w", source, err)
	}
	return out, nil
}

// ForgetIntent deletes the intent in recorded for source (its message was
// settled otherwise).
func (s *Store) ForgetIntent(ctx context.Context, source id.EventID, in Intent) error {
	_, err := s.db.Exec(ctx, `DELETE FROM tracking_delivery_intent WHERE source_event_id = $1 AND txn_key = $2 AND run_key = $3`, source, in.TxnKey, in.Run)
	if err != nil {
		return fmt.Errorf("failed to forget the intent to answer %s: %w", source, err)
	}
	return nil
}
