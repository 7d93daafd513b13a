package tracking

import (
	"context"
	"fmt"
	"time"

	"maunium.net/go/mautrix/id"
)

// InvitedRoom is a room a hookroom account joined because a person
// invited it, rather than because config.yaml names it.
type InvitedRoom struct {
	RoomID id.RoomID
	// Account is the hookroom account that joined (the router or an agent).
	Account id.UserID
	// Inviter sent the invite.
	Inviter id.UserID
	// IsDirect is the invite's is_direct flag (a direct message).
	IsDirect bool
	// AcceptedAt is when the invite was accepted (millisecond precision).
	AcceptedAt time.Time
}

// RememberInvitedRoom records that r.Account joined r.RoomID on r.Inviter's
// invite. It is called right after the invite was accepted; recording the
// same room and account again replaces the row (a new invite after a kick).
// A zero AcceptedAt means now.
func (s *Store) RememberInvitedRoom(ctx context.Context, r InvitedRoom) error {
	at := r.AcceptedAt
	if at.IsZero() {
		at = s.now()
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO tracking_invited_room (room_id, account, inviter, is_direct, accepted_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (room_id, account) DO UPDATE
			SET inviter = excluded.inviter, is_direct = excluded.is_direct, accepted_at = excluded.accepted_at`,
		r.RoomID, r.Account, r.Inviter, r.IsDirect, at.UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to remember that %s joined %s on an invite: %w", r.Account, r.RoomID, err)
	}
	return nil
}

// ForgetInvitedRoom deletes the row of room and account (the account left,
// was kicked or banned) and reports whether there was one.
func (s *Store) ForgetInvitedRoom(ctx context.Context, room id.RoomID, account id.UserID) (bool, error) {
	res, err := s.db.Exec(ctx, `DELETE FROM tracking_invited_room WHERE room_id = $1 AND account = $2`, room, account)
	if err != nil {
		return false, fmt.Errorf("failed to forget invited room %s of %s: %w", room, account, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("failed to forget invited room %s of %s: %w", room, account, err)
	}
	return n > 0, nil
}

// InvitedRooms lists every remembered invited room, by room id then
// account. The bot loads them once at start-up.
func (s *Store) InvitedRooms(ctx context.Context) ([]InvitedRoom, error) {
	rows, err := s.db.Query(ctx, `
		SELECT room_id, account, inviter, is_direct, accepted_at
		FROM tracking_invited_room ORDER BY room_id, account`)
	if err != nil {
		return nil, fmt.Errorf("failed to list invited rooms: %w", err)
	}
	defer rows.Close()
	var out []InvitedRoom
	for rows.Next() {
		var r InvitedRoom
		var at int64
		if err := rows.Scan(&r.RoomID, &r.Account, &r.Inviter, &r.IsDirect, &at); err != nil {
			return nil, fmt.Errorf("failed to read an invited room: %w", err)
		}
		r.AcceptedAt = time.UnixMilli(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to list invited rooms: %w", err)
	}
	return out, nil
}
