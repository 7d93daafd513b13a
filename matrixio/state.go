package matrixio

import (
	"context"
	"errors"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// notFound adds ErrNotFound to err's chain when the homeserver said
// M_NOT_FOUND, so callers need not know mautrix's error values.
func notFound(err error) error {
	if errors.Is(err, mautrix.MNotFound) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// GetState reads the content of the state event (evtType, stateKey) in room
// into into (a pointer to a struct or map). It returns an error wrapping
// ErrNotFound if the state was never set.
func (a *Account) GetState(ctx context.Context, room id.RoomID, evtType event.Type, stateKey string, into any) error {
	err := a.do(ctx, "get state", retryTransient, func(ctx context.Context) error {
		return a.cli().StateEvent(ctx, room, evtType, stateKey, into)
	})
	if err != nil {
		return fmt.Errorf("failed to get state %s/%q in %s: %w", evtType.Type, stateKey, room, notFound(err))
	}
	return nil
}

// GetStateEvents returns every current state event of evtType in room,
// keyed by state key (empty map if there are none). It reads the room's
// whole state (GET /state) and filters it, as there is no per-type
// endpoint.
func (a *Account) GetStateEvents(ctx context.Context, room id.RoomID, evtType event.Type) (map[string]*event.Event, error) {
	var state []*event.Event
	err := a.do(ctx, "get room state", retryTransient, func(ctx context.Context) (err error) {
		state, err = a.cli().StateAsArray(ctx, room)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to get state of %s: %w", room, notFound(err))
	}
	out := make(map[string]*event.Event)
	for _, evt := range state {
		if evt == nil || evt.Type.Type != evtType.Type || evt.StateKey == nil {
			continue
		}
		evt.RoomID = room
		if evt.Content.Parsed == nil {
			_ = evt.Content.ParseRaw(evt.Type)
		}
		out[*evt.StateKey] = evt
	}
	return out, nil
}

// PutState sets the state event (evtType, stateKey) in room to content and
// returns the event id. Setting the same state again is harmless, so it is
// retried like sends.
func (a *Account) PutState(ctx context.Context, room id.RoomID, evtType event.Type, stateKey string, content any) (id.EventID, error) {
	evtType.Class = event.StateEventType
	var resp *mautrix.RespSendEvent
	err := a.do(ctx, "put state", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().SendStateEvent(ctx, room, evtType, stateKey, content)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to put state %s/%q in %s: %w", evtType.Type, stateKey, room, err)
	}
	return resp.EventID, nil
}

// JoinedMembers returns the users currently joined to room with their
// room display names.
func (a *Account) JoinedMembers(ctx context.Context, room id.RoomID) (map[id.UserID]mautrix.JoinedMember, error) {
	var resp *mautrix.RespJoinedMembers
	err := a.do(ctx, "joined members", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().JoinedMembers(ctx, room)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to get joined members of %s: %w", room, err)
	}
	return resp.Joined, nil
}

// Members returns the m.room.member events of room: every user with a
// membership (joined, invited, left, banned, knocking), content parsed.
func (a *Account) Members(ctx context.Context, room id.RoomID) ([]*event.Event, error) {
	var resp *mautrix.RespMembers
	err := a.do(ctx, "members", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().Members(ctx, room)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to get members of %s: %w", room, err)
	}
	for _, evt := range resp.Chunk {
		evt.RoomID = room
		evt.Type.Class = event.StateEventType
	}
	return resp.Chunk, nil
}

// Membership returns user's membership in room ("" if the user never had
// one).
func (a *Account) Membership(ctx context.Context, room id.RoomID, user id.UserID) (event.Membership, error) {
	var content event.MemberEventContent
	err := a.GetState(ctx, room, event.StateMember, user.String(), &content)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	return content.Membership, nil
}
