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
	for _, evt := range events {
		evt.RoomID = room
		if evt.Type == event.EventEncrypted {
			_ = evt.Content.ParseRaw(evt.Type)
		}
	}
	if helper := a.cryptoHelper(); helper != nil {
		a.decryptEvents(ctx, helper, events)
	}
	return events, nil
}
