package matrixio

import (
	"context"
	"fmt"
	"slices"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// ThreadEvents returns the thread rooted at root in room as the homeserver
// has it: the root first, then up to limit of the thread's newest events,
// oldest first, decrypted where the account holds the keys (restored from
// the key backup after a lost database, for instance). Events whose keys
// it does not hold stay m.room.encrypted: the caller tells which it could
// not read. It is how a conversation's earlier messages are read back from
// the room when hookroom's own history of it is gone.
func (a *Account) ThreadEvents(ctx context.Context, room id.RoomID, root id.EventID, limit int) ([]*event.Event, error) {
	cli := a.cli()
	var rootEvt *event.Event
	err := a.do(ctx, "thread root", retryTransient, func(ctx context.Context) (err error) {
		rootEvt, err = cli.GetEvent(ctx, room, root)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to get thread root %s in %s: %w", root, room, err)
	}
	var thread []*event.Event
	from := ""
	for len(thread) < limit {
		var resp *mautrix.RespGetRelations
		err := a.do(ctx, "thread relations", retryTransient, func(ctx context.Context) (err error) {
			resp, err = cli.GetRelations(ctx, room, root, &mautrix.ReqGetRelations{
				RelationType: event.RelThread,
				Dir:          mautrix.DirectionBackward,
				From:         from,
				Limit:        min(limit-len(thread), 100),
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("failed to get thread of %s in %s: %w", root, room, err)
		}
		thread = append(thread, resp.Chunk...)
		if resp.NextBatch == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.NextBatch
	}
	slices.Reverse(thread)
	events := append([]*event.Event{rootEvt}, thread...)
	a.prepareRead(ctx, room, events)
	for i, evt := range events {
		if evt.Type == event.EventMessage {
			events[i] = a.withLatestEdit(ctx, room, evt)
		}
	}
	return events, nil
}

// prepareRead parses and, where the keys are at hand, decrypts events read
// from room outside the sync.
func (a *Account) prepareRead(ctx context.Context, room id.RoomID, events []*event.Event) {
	for _, evt := range events {
		evt.RoomID = room
		_ = evt.Content.ParseRaw(evt.Type) // unknown types stay raw
	}
	if helper := a.cryptoHelper(); helper != nil {
		a.decryptEvents(ctx, helper, events)
	}
}

// withLatestEdit returns evt with the text of its latest edit by its own
// sender (streamed replies are a placeholder edited into the answer), or
// evt itself when it has none or the edit cannot be read.
func (a *Account) withLatestEdit(ctx context.Context, room id.RoomID, evt *event.Event) *event.Event {
	var resp *mautrix.RespGetRelations
	err := a.do(ctx, "edit relations", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().GetRelations(ctx, room, evt.ID, &mautrix.ReqGetRelations{
			RelationType: event.RelReplace,
			Dir:          mautrix.DirectionBackward,
			Limit:        20,
		})
		return err
	})
	if err != nil {
		return evt
	}
	a.prepareRead(ctx, room, resp.Chunk)
	for _, edit := range resp.Chunk {
		if edit.Sender != evt.Sender || edit.Type != event.EventMessage {
			continue
		}
		if nc := edit.Content.AsMessage().NewContent; nc != nil {
			out := *evt
			out.Content = event.Content{Parsed: nc}
			return &out
		}
	}
	return evt
}
