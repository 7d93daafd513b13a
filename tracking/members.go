package tracking

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"maunium.net/go/mautrix/id"
)

const insertMemberQuery = `
	INSERT INTO tracking_member (room_id, user_id, seeded, first_seen_at)
	VALUES ($1, $2, $3, $4)
	ON CONFLICT (room_id, user_id) DO NOTHING
`

// MarkJoined records that user is joined to room and reports whether this is the first time
// ever for the pair, i.e. whether room:member_joined should fire. Leaving and rejoining, a
// restart, or a user recorded by SeedMembers all give false. Exactly one of concurrent calls
// for the same pair gets true.
func (s *Store) MarkJoined(ctx context.Context, room id.RoomID, user id.UserID) (first bool, err error) {
	res, err := s.db.Exec(ctx, insertMemberQuery, room, user, false, s.now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("failed to record %s joined %s: %w", user, room, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("failed to record %s joined %s: %w", user, room, err)
	}
	return n == 1, nil
}

// SeedMembers records the members already in room when hookroom first syncs it, without
// anything to fire: a later MarkJoined for any of them returns false. It also marks the room
// as seeded (see RoomSeeded), in the same transaction. Seeding a room again only adds users
// not recorded yet.
func (s *Store) SeedMembers(ctx context.Context, room id.RoomID, users []id.UserID) error {
	now := s.now().UnixMilli()
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		for _, user := range users {
			if _, err := s.db.Exec(ctx, insertMemberQuery, room, user, true, now); err != nil {
				return err
			}
		}
		_, err := s.db.Exec(ctx,
			`INSERT INTO tracking_room (room_id, seeded_at) VALUES ($1, $2) ON CONFLICT (room_id) DO NOTHING`, room, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to seed the members of %s: %w", room, err)
	}
	return nil
}

// RoomSeeded reports whether SeedMembers has run for room, i.e. whether its initial members
// are known. The bot seeds a room the first time it syncs it and only then fires joins.
func (s *Store) RoomSeeded(ctx context.Context, room id.RoomID) (bool, error) {
	var seededAt int64
	err := s.db.QueryRow(ctx, `SELECT seeded_at FROM tracking_room WHERE room_id = $1`, room).Scan(&seededAt)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return false, fmt.Errorf("failed to read whether %s is seeded: %w", room, err)
	}
}
