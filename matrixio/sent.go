package matrixio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// ErrSentUnknown is returned by FindSent when it could not look at every
// event the account sent into the room since the position: more of them
// than Config.BackfillLimit. The message may or may not have been sent.
var ErrSentUnknown = errors.New("cannot tell whether the message was sent: too many own events since the position")

// SyncPosition returns the account's latest saved sync position ("" when
// it never completed a sync). Every event the account sends from now on
// comes after it in the account's sync: pass it to FindSent later to learn
// whether a send whose answer was lost reached the homeserver.
func (a *Account) SyncPosition(ctx context.Context) (string, error) {
	if p := a.position.Load(); p != nil {
		return *p, nil
	}
	since, err := a.m.store.LoadNextBatch(ctx, a.userID)
	if err != nil {
		return "", err
	}
	a.position.CompareAndSwap(nil, &since)
	return *a.position.Load(), nil
}

// setPosition records the sync position just saved.
func (a *Account) setPosition(since string) { a.position.Store(&since) }

// FindSent looks for the message events this account sent into room with
// the transaction key txnKey (SendOptions.TxnKey) after the sync position
// since (SyncPosition taken before the send), and returns their event ids
// in the room's order: none when nothing was posted, more than one when a
// send was repeated and the homeserver did not recognise it. Use it before
// sending again what a crashed or cut off request may have posted already:
// a homeserver forgets a transaction id after a while, and Dendrite does
// not remember one at all when the client went away before the request
// completed.
//
// It asks a sync from since filtered to the room's message events sent by
// the account, where the homeserver marks each of the device's own events
// with its transaction id (unsigned.transaction_id; /messages does not on
// Dendrite). It looks at the newest Config.BackfillLimit such events and
// returns ErrSentUnknown (with what it found) when there were more. The
// sync neither waits nor moves the account's saved position.
func (a *Account) FindSent(ctx context.Context, room id.RoomID, since, txnKey string) ([]id.EventID, error) {
	return a.findSent(ctx, room, since, wireTxnID(txnKey, room, event.EventMessage))
}

func (a *Account) findSent(ctx context.Context, room id.RoomID, since, txnID string) ([]id.EventID, error) {
	filter, err := a.sentFilter(room)
	if err != nil {
		return nil, err
	}
	var resp *mautrix.RespSync
	err = a.do(ctx, "look for a sent message", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().FullSyncRequest(ctx, mautrix.ReqSync{Since: since, FilterID: filter})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to look for a message sent to %s: %w", room, err)
	}
	var timelines []mautrix.SyncTimeline
	if r := resp.Rooms.Join[room]; r != nil {
		timelines = append(timelines, r.Timeline)
	}
	if r := resp.Rooms.Leave[room]; r != nil {
		timelines = append(timelines, r.Timeline)
	}
	var found []id.EventID
	limited := false
	for _, tl := range timelines {
		for _, evt := range tl.Events {
			if evt != nil && evt.Sender == a.userID && evt.Unsigned.TransactionID == txnID {
				found = append(found, evt.ID)
			}
		}
		limited = limited || tl.Limited
	}
	if limited {
		return found, fmt.Errorf("failed to look for a message sent to %s: %w", room, ErrSentUnknown)
	}
	return found, nil
}

// sentFilter is the inline filter of FindSent's sync: room's message
// events (encrypted or not) sent by the account, nothing else.
func (a *Account) sentFilter(room id.RoomID) (string, error) {
	none := func() *mautrix.FilterPart {
		return &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}}
	}
	filter := &mautrix.Filter{
		Presence:    none(),
		AccountData: none(),
		Room: &mautrix.RoomFilter{
			Rooms:        []id.RoomID{room},
			IncludeLeave: true,
			Timeline: &mautrix.FilterPart{
				Limit:   max(a.m.cfg.BackfillLimit, a.m.cfg.TimelineLimit),
				Senders: []id.UserID{a.userID},
				Types:   []event.Type{event.EventMessage, event.EventEncrypted},
			},
			State:       none(),
			Ephemeral:   none(),
			AccountData: none(),
		},
	}
	raw, err := json.Marshal(filter)
	if err != nil {
		return "", fmt.Errorf("failed to marshal the sent-message filter: %w", err)
	}
	return string(raw), nil
}

// mayHaveActed reports whether a failed send may nevertheless have posted
// its event: the connection failed or the server failed, as opposed to a
// rate limit or a refusal, where the server did not act on the request.
func mayHaveActed(err error) bool {
	if err == nil {
		return false
	}
	var httpErr mautrix.HTTPError
	if errors.As(err, &httpErr) && httpErr.Response != nil {
		return httpErr.Response.StatusCode >= 500
	}
	return true
}
