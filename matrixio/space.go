package matrixio

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// SpaceSpec describes a Matrix Space (a room of type m.space) to keep.
type SpaceSpec struct {
	// Alias finds the space on restart; it is created with it when it does
	// not resolve, which needs the alias to be on Config.ServerName.
	Alias id.RoomAlias
	// Name is set when the space is created.
	Name string
	// Invite lists users invited when the space is created, and later
	// whenever they never had a membership in it.
	Invite []id.UserID
}

// SpaceSync says what SyncSpace changed.
type SpaceSync struct {
	SpaceID id.RoomID
	Created bool
	Added   []id.RoomID // rooms made children
	Removed []id.RoomID // children no longer wanted, emptied
	Invited []id.UserID
}

// EnsureSpace returns the space spec names, creating it (as this account,
// which then holds all power in it) when its alias does not resolve. It is
// idempotent: a restart finds the space by its alias, and a concurrent
// creation (M_ROOM_IN_USE) is resolved again.
func (a *Account) EnsureSpace(ctx context.Context, spec SpaceSpec) (id.RoomID, bool, error) {
	roomID, err := a.ResolveAlias(ctx, spec.Alias)
	if err == nil {
		return roomID, false, nil
	}
	localpart, server, ok := parseAlias(spec.Alias)
	if !ok || server != a.m.cfg.ServerName {
		return "", false, fmt.Errorf("failed to ensure space %s: %w: %w", spec.Alias, ErrForeignAlias, err)
	}
	if !errors.Is(err, ErrNotFound) {
		return "", false, err
	}
	roomID, err = a.CreateRoom(ctx, CreateRoomOptions{
		Name: spec.Name, AliasLocalpart: localpart, Invite: spec.Invite, Space: true,
	})
	if errors.Is(err, mautrix.MRoomInUse) {
		roomID, err = a.ResolveAlias(ctx, spec.Alias)
		return roomID, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("failed to create space %s: %w", spec.Alias, err)
	}
	return roomID, true, nil
}

// SpaceChildren returns the rooms space lists as children: its
// m.space.child events whose content has a via (an empty content removes a
// child), sorted.
func (a *Account) SpaceChildren(ctx context.Context, space id.RoomID) ([]id.RoomID, error) {
	events, err := a.GetStateEvents(ctx, space, event.StateSpaceChild)
	if err != nil {
		return nil, err
	}
	var rooms []id.RoomID
	for key, evt := range events {
		if via, _ := evt.Content.Raw["via"].([]any); len(via) > 0 {
			rooms = append(rooms, id.RoomID(key))
		}
	}
	slices.Sort(rooms)
	return rooms, nil
}

// SyncSpace makes space spec (EnsureSpace) hold exactly rooms as children:
// every missing room gets an m.space.child (via this homeserver) and an
// m.space.parent in the room (best effort: the account may lack the power
// in a room it did not create; the child alone makes clients list it);
// every child not in rooms gets an empty m.space.child, which removes it.
// Users of spec.Invite who never had a membership in the space are
// invited. Called at start-up and on every reload.
func (a *Account) SyncSpace(ctx context.Context, spec SpaceSpec, rooms []id.RoomID) (SpaceSync, error) {
	var res SpaceSync
	space, created, err := a.EnsureSpace(ctx, spec)
	if err != nil {
		return res, err
	}
	res.SpaceID, res.Created = space, created
	if created {
		res.Invited = slices.Clone(spec.Invite)
	} else {
		for _, u := range spec.Invite {
			m, err := a.Membership(ctx, space, u)
			if err != nil {
				return res, err
			}
			if m != "" {
				continue
			}
			if err := a.Invite(ctx, space, u); err != nil {
				return res, err
			}
			res.Invited = append(res.Invited, u)
		}
	}
	have, err := a.SpaceChildren(ctx, space)
	if err != nil {
		return res, err
	}
	want := slices.Clone(rooms)
	slices.Sort(want)
	want = slices.Compact(want)
	via := []string{a.m.cfg.ServerName}
	for _, room := range want {
		if _, found := slices.BinarySearch(have, room); found {
			continue
		}
		if _, err := a.PutState(ctx, space, event.StateSpaceChild, room.String(), &event.SpaceChildEventContent{Via: via}); err != nil {
			return res, err
		}
		if _, err := a.PutState(ctx, room, event.StateSpaceParent, space.String(), &event.SpaceParentEventContent{Via: via, Canonical: true}); err != nil {
			zerolog.Ctx(ctx).Debug().Err(err).Stringer("room_id", room).Msg("Could not set the room's space parent; the space lists it anyway")
		}
		res.Added = append(res.Added, room)
	}
	for _, room := range have {
		if _, found := slices.BinarySearch(want, room); found {
			continue
		}
		if _, err := a.PutState(ctx, space, event.StateSpaceChild, room.String(), map[string]any{}); err != nil {
			return res, err
		}
		res.Removed = append(res.Removed, room)
	}
	return res, nil
}
