package tracking

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"
)

// ProvisionedRoom is a configured room as it was last provisioned: which
// room the configuration resolved to, a hash of the configuration that
// produced it, and the accounts that were joined to it.
type ProvisionedRoom struct {
	// Key names the room in the configuration (the caller's choice of
	// scheme; the bot uses "room:<key>" and "ref:<id or alias>").
	Key    string
	RoomID id.RoomID
	// SpecHash is an opaque digest of everything that was provisioned
	// (alias, name, invite list, member accounts, …): when the
	// configuration hashes differently, the room is provisioned again.
	SpecHash string
	// Accounts are the hookroom accounts joined, sorted.
	Accounts []id.UserID
	// ProvisionedAt is when provisioning finished (millisecond precision).
	ProvisionedAt time.Time
}

// RememberProvisioned records that r was provisioned completely, replacing
// what was remembered under r.Key. A zero ProvisionedAt means now. Call it
// only after every step succeeded: a room that is not remembered is
// provisioned again at the next start.
func (s *Store) RememberProvisioned(ctx context.Context, r ProvisionedRoom) error {
	at := r.ProvisionedAt
	if at.IsZero() {
		at = s.now()
	}
	accounts := make([]string, len(r.Accounts))
	for i, a := range r.Accounts {
		accounts[i] = string(a)
	}
	slices.Sort(accounts)
	_, err := s.db.Exec(ctx, `
		INSERT INTO tracking_provisioned_room (room_key, room_id, spec_hash, accounts, provisioned_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (room_key) DO UPDATE
			SET room_id = excluded.room_id, spec_hash = excluded.spec_hash,
				accounts = excluded.accounts, provisioned_at = excluded.provisioned_at`,
		r.Key, r.RoomID, r.SpecHash, strings.Join(accounts, "\n"), at.UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to remember provisioned room %s (%s): %w", r.Key, r.RoomID, err)
	}
	return nil
}

// ProvisionedRooms returns every remembered room by key.
func (s *Store) ProvisionedRooms(ctx context.Context) (map[string]ProvisionedRoom, error) {
	rows, err := s.db.Query(ctx, `
		SELECT room_key, room_id, spec_hash, accounts, provisioned_at FROM tracking_provisioned_room`)
	if err != nil {
		return nil, fmt.Errorf("failed to list provisioned rooms: %w", err)
	}
	defer rows.Close()
	out := map[string]ProvisionedRoom{}
	for rows.Next() {
		var r ProvisionedRoom
		var accounts string
		var at int64
		if err := rows.Scan(&r.Key, &r.RoomID, &r.SpecHash, &accounts, &at); err != nil {
			return nil, fmt.Errorf("failed to read a provisioned room: %w", err)
		}
		if accounts != "" {
			for _, a := range strings.Split(accounts, "\n") {
				r.Accounts = append(r.Accounts, id.UserID(a))
			}
		}
		r.ProvisionedAt = time.UnixMilli(at)
		out[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to list provisioned rooms: %w", err)
	}
	return out, nil
}

// ForgetProvisioned deletes what is remembered under keys (rooms no longer
// in the configuration, or found no longer joined) and reports how many
// rows there were.
func (s *Store) ForgetProvisioned(ctx context.Context, keys ...string) (int, error) {
	n := 0
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		for _, key := range keys {
			res, err := s.db.Exec(ctx, `DELETE FROM tracking_provisioned_room WHERE room_key = $1`, key)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("failed to forget provisioned rooms: %w", err)
	}
	return n, nil
}
