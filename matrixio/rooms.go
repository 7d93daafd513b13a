package matrixio

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// CreateRoomOptions describe a room to create. The zero value creates an
// unnamed private room (preset private_chat: invite only, invitees get
// power level 0 unless listed in PowerUsers).
type CreateRoomOptions struct {
	Name  string
	Topic string
	// AliasLocalpart publishes "#AliasLocalpart:ServerName" for the room.
	// Creating a room with an alias that is taken fails with an error
	// wrapping mautrix.MRoomInUse.
	AliasLocalpart string
	// Invite lists users invited at creation.
	Invite []id.UserID
	// PowerUsers raises the power level of these users right after
	// creation (e.g. agents that set room state: 50; co-admins: 100).
	PowerUsers map[id.UserID]int
	// Public uses the public_chat preset (anyone can join) instead of
	// private_chat.
	Public bool
	// Space creates a space (creation_content type m.space) instead of a room.
	Space bool
	// Encrypted turns on end-to-end encryption (m.megolm.v1.aes-sha2) from
	// the start. It cannot be turned off later.
	Encrypted bool
}

// CreateRoom creates a room as this account and returns its id. A room
// without an alias is never retried after an ambiguous failure (a server
// error or a lost response could mean it exists), only after rate limiting;
// with an alias, retries are safe because a second creation fails with
// M_ROOM_IN_USE (EnsureRoom resolves the alias then).
func (a *Account) CreateRoom(ctx context.Context, opts CreateRoomOptions) (id.RoomID, error) {
	req := &mautrix.ReqCreateRoom{
		Name:          opts.Name,
		Topic:         opts.Topic,
		RoomAliasName: opts.AliasLocalpart,
		Invite:        opts.Invite,
		Preset:        "private_chat",
	}
	if opts.Public {
		req.Preset = "public_chat"
	}
	if opts.Space {
		req.CreationContent = map[string]any{"type": event.RoomTypeSpace}
	}
	if opts.Encrypted {
		req.InitialState = append(req.InitialState, &event.Event{
			Type:    event.StateEncryption,
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		})
	}
	mode := retryRejected
	if opts.AliasLocalpart != "" {
		mode = retryTransient
	}
	var resp *mautrix.RespCreateRoom
	err := a.do(ctx, "create room", mode, func(ctx context.Context) (err error) {
		resp, err = a.cli().CreateRoom(ctx, req)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to create room %q: %w", opts.Name, err)
	}
	if len(opts.PowerUsers) > 0 {
		if err := a.raisePowerLevels(ctx, resp.RoomID, opts.PowerUsers); err != nil {
			return resp.RoomID, err
		}
	}
	zerolog.Ctx(ctx).Info().Stringer("room_id", resp.RoomID).Str("alias_localpart", opts.AliasLocalpart).Msg("Created room")
	return resp.RoomID, nil
}

// raisePowerLevels merges users into room's power levels. It edits the
// current event rather than overriding at creation, so the creator's entry
// stays however the room version defines it.
func (a *Account) raisePowerLevels(ctx context.Context, room id.RoomID, users map[id.UserID]int) error {
	var raw map[string]any
	if err := a.GetState(ctx, room, event.StatePowerLevels, "", &raw); err != nil {
		return err
	}
	current, _ := raw["users"].(map[string]any)
	merged := make(map[string]any, len(current)+len(users))
	maps.Copy(merged, current)
	for u, level := range users {
		merged[u.String()] = level
	}
	raw["users"] = merged
	if _, err := a.PutState(ctx, room, event.StatePowerLevels, "", raw); err != nil {
		return err
	}
	return nil
}

// ResolveAlias returns the room an alias points to. It returns an error
// wrapping ErrNotFound if the alias does not exist.
func (a *Account) ResolveAlias(ctx context.Context, alias id.RoomAlias) (id.RoomID, error) {
	var resp *mautrix.RespAliasResolve
	err := a.do(ctx, "resolve alias", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().ResolveAlias(ctx, alias)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to resolve %s: %w", alias, notFound(err))
	}
	return resp.RoomID, nil
}

// Invite invites user to room. It succeeds without a request if the user
// is already joined or invited.
func (a *Account) Invite(ctx context.Context, room id.RoomID, user id.UserID) error {
	membership, err := a.Membership(ctx, room, user)
	if err != nil {
		return err
	}
	if membership == event.MembershipJoin || membership == event.MembershipInvite {
		return nil
	}
	err = a.do(ctx, "invite", retryTransient, func(ctx context.Context) error {
		_, err := a.cli().InviteUser(ctx, room, &mautrix.ReqInviteUser{UserID: user})
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to invite %s to %s: %w", user, room, err)
	}
	return nil
}

// Join joins the room given by id or alias (optionally through the servers
// in via) and returns its id. Joining a room the account is in already is
// a no-op on the homeserver.
func (a *Account) Join(ctx context.Context, roomIDOrAlias string, via ...string) (id.RoomID, error) {
	var resp *mautrix.RespJoinRoom
	err := a.do(ctx, "join", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().JoinRoom(ctx, roomIDOrAlias, &mautrix.ReqJoinRoom{Via: via})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to join %s: %w", roomIDOrAlias, err)
	}
	return resp.RoomID, nil
}

// JoinedRooms returns the rooms the account is joined to (not those it
// is only invited to). It is one request however many rooms there are, so
// start-up uses it to check remembered rooms instead of joining each again.
func (a *Account) JoinedRooms(ctx context.Context) ([]id.RoomID, error) {
	var resp *mautrix.RespJoinedRooms
	err := a.do(ctx, "joined rooms", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().JoinedRooms(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list the rooms %s is joined to: %w", a.userID, err)
	}
	return resp.JoinedRooms, nil
}

// AcceptInvite joins a room the account was invited to (see
// SyncBatch.Invites). Whether to accept is the caller's decision.
func (a *Account) AcceptInvite(ctx context.Context, room id.RoomID) error {
	err := a.do(ctx, "accept invite", retryTransient, func(ctx context.Context) error {
		_, err := a.cli().JoinRoomByID(ctx, room)
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to accept invite to %s: %w", room, err)
	}
	return nil
}

// Leave leaves room (or rejects a pending invite to it).
func (a *Account) Leave(ctx context.Context, room id.RoomID) error {
	err := a.do(ctx, "leave", retryTransient, func(ctx context.Context) error {
		_, err := a.cli().LeaveRoom(ctx, room)
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to leave %s: %w", room, err)
	}
	return nil
}

// AddToSpace links room into space: m.space.child in the space and a
// canonical m.space.parent in the room, both via this homeserver. The
// account needs enough power in both.
func (a *Account) AddToSpace(ctx context.Context, space, room id.RoomID) error {
	via := []string{a.m.cfg.ServerName}
	if _, err := a.PutState(ctx, space, event.StateSpaceChild, room.String(), &event.SpaceChildEventContent{Via: via}); err != nil {
		return err
	}
	if _, err := a.PutState(ctx, room, event.StateSpaceParent, space.String(), &event.SpaceParentEventContent{Via: via, Canonical: true}); err != nil {
		return err
	}
	return nil
}

// RoomSpec names a room hookroom should be in, as config.yaml does: by
// alias (created if missing) or by id (must exist).
type RoomSpec struct {
	// Alias is the room's alias ("#lobby:example.org"). If it does not
	// resolve, the room is created with it, which needs the alias to be on
	// Config.ServerName.
	Alias id.RoomAlias
	// ID is used instead of the alias when set.
	ID id.RoomID
	// Name and Topic are set when the room is created; existing rooms are
	// left as they are.
	Name  string
	Topic string
	// Encrypted creates the room with end-to-end encryption. Existing rooms
	// are left as they are.
	Encrypted bool
}

// ErrForeignAlias is returned by EnsureRoom for an alias on another server
// that does not resolve: hookroom can only create aliases on its own
// homeserver.
var ErrForeignAlias = errors.New("room alias is not on this homeserver")

// EnsureRoom makes sure the room spec names exists and that this account
// (normally the router) and every account in members are joined, and
// returns the room id. It is called at start-up and on reload for every
// configured room, and is idempotent: the alias is resolved first, so a
// restart never creates the room twice; a concurrent or half-finished
// creation shows up as M_ROOM_IN_USE and is resolved again. Invites are
// sent by this account, so it needs invite permission in existing rooms.
func (a *Account) EnsureRoom(ctx context.Context, spec RoomSpec, members []*Account) (id.RoomID, error) {
	log := zerolog.Ctx(ctx).With().Stringer("alias", spec.Alias).Logger()
	ctx = log.WithContext(ctx)
	roomID := spec.ID
	created := false
	if roomID == "" {
		if spec.Alias == "" {
			return "", fmt.Errorf("%w: room spec has neither alias nor id", ErrInvalidConfig)
		}
		var err error
		roomID, err = a.ResolveAlias(ctx, spec.Alias)
		if err != nil {
			if _, server, ok := parseAlias(spec.Alias); !ok || server != a.m.cfg.ServerName {
				return "", fmt.Errorf("failed to ensure room %s: %w: %w", spec.Alias, ErrForeignAlias, err)
			}
			if !errors.Is(err, ErrNotFound) {
				return "", err
			}
			if roomID, err = a.createForAlias(ctx, spec, members); err != nil {
				return "", err
			}
			created = true
		}
	}
	if !created {
		if _, err := a.Join(ctx, roomID.String()); err != nil {
			return "", err
		}
	}
	for _, member := range members {
		if member == nil || member.userID == a.userID {
			continue
		}
		if err := a.Invite(ctx, roomID, member.userID); err != nil {
			return "", err
		}
		if _, err := member.Join(ctx, roomID.String()); err != nil {
			return "", err
		}
	}
	return roomID, nil
}

// createForAlias creates the room spec describes, publishing its alias.
func (a *Account) createForAlias(ctx context.Context, spec RoomSpec, members []*Account) (id.RoomID, error) {
	localpart, server, ok := parseAlias(spec.Alias)
	if !ok || server != a.m.cfg.ServerName {
		return "", fmt.Errorf("failed to create %s: %w", spec.Alias, ErrForeignAlias)
	}
	var invite []id.UserID
	for _, member := range members {
		if member != nil && member.userID != a.userID {
			invite = append(invite, member.userID)
		}
	}
	roomID, err := a.CreateRoom(ctx, CreateRoomOptions{
		Name:           spec.Name,
		Topic:          spec.Topic,
		AliasLocalpart: localpart,
		Invite:         invite,
		Encrypted:      spec.Encrypted,
	})
	if errors.Is(err, mautrix.MRoomInUse) {
		// Created meanwhile (or by an earlier attempt whose response was lost).
		return a.ResolveAlias(ctx, spec.Alias)
	}
	return roomID, err
}

// parseAlias splits "#localpart:server" into its parts.
func parseAlias(alias id.RoomAlias) (localpart, server string, ok bool) {
	s := string(alias)
	if !strings.HasPrefix(s, "#") {
		return "", "", false
	}
	localpart, server, ok = strings.Cut(s[1:], ":")
	if !ok || localpart == "" || server == "" {
		return "", "", false
	}
	return localpart, server, true
}
