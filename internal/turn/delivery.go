package turn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/tracking"
)

// How a turn delivers its messages so that a crash at any point leaves one
// answer, not two:
//
//   - A new message (placeholder, reply, a part of a long reply, a notice)
//     is sent with sendNew: its intent (transaction key, the account's sync
//     position) is recorded before the send, and its event id after. A
//     replayed turn (recoverDelivery) looks for every intent whose event id
//     was never recorded among the account's own events (FindSent) and
//     adopts what it finds, so the answer edits it instead of posting again.
//     Homeservers are not relied on to remember transaction ids: Dendrite
//     forgets one whose request's client died before it completed. When
//     the turn ends, it looks once more and redacts copies it does not use
//     (sweepIntents): a killed request may reach the homeserver late.
//   - Edits carry a transaction key unique to the run (runKey), so a
//     replayed turn's edits are never swallowed as repeats of the last
//     run's, and the streaming edits end before the final edit is sent.

// recheckDelay is how long a replayed turn waits before it looks a second
// time for the messages of the killed run that it did not find, before it
// posts them anew.
const recheckDelay = 2 * time.Second

// sendTimeout bounds a send that is not cancelled with the turn: a send
// cancelled in flight may still land, after what the turn sends next.
const sendTimeout = time.Minute

// newRunKey returns a random key naming one run of a turn.
func newRunKey() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// editOptions are the options of an edit made in this run at stage: a
// transaction key of its own, so that a replayed turn's edit is never
// taken for a repeat of the last run's.
func (t *turn) editOptions(stage string) matrixio.SendOptions {
	return t.sendOptions(stage + "/" + t.runKey)
}

// sendNew posts text as a new message that is part part of the turn's
// answer (-1 for a notice before the answer), with opts (whose TxnKey is
// set): the intent first, then the send, then its event id, which
// replaces the intent.
func (t *turn) sendNew(ctx context.Context, part int, text string, opts matrixio.SendOptions) (id.EventID, error) {
	since, err := t.acct.SyncPosition(ctx)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to read the sync position; a replay will look for this message from the start")
	}
	in := tracking.Intent{Room: t.env.RoomID, Part: part, TxnKey: opts.TxnKey, Run: t.runKey, Sender: t.acct.UserID(), Since: since}
	if err := t.deps.Ledger.IntendReply(context.WithoutCancel(ctx), t.ev.ID, in); err != nil {
		t.log.Warn().Err(err).Msg("failed to record the intent to send; a crash during this send may leave it doubled")
	}
	evID, err := t.acct.SendText(ctx, t.env.RoomID, text, opts)
	if err != nil {
		t.mu.Lock()
		t.unconfirmed = true // it may have been posted all the same
		t.mu.Unlock()
		return "", err
	}
	t.recordReply(ctx, tracking.Reply{Part: part, EventID: evID, Sender: t.acct.UserID(), TxnKey: opts.TxnKey, Run: t.runKey})
	return evID, nil
}

// recordReply remembers a message of the turn's answer, so a replay edits
// it and a redaction of the message removes it.
func (t *turn) recordReply(ctx context.Context, r tracking.Reply) {
	if err := t.deps.Ledger.RecordReply(context.WithoutCancel(ctx), t.env.RoomID, t.ev.ID, r); err != nil {
		t.log.Warn().Err(err).Msg("failed to record the reply")
		t.mu.Lock()
		t.unrecorded = true // sweepIntents must not take it for a duplicate
		t.mu.Unlock()
	}
}

// recoverDelivery runs before a replayed turn sends anything. It looks for
// each message an earlier run meant to post but never saw posted, adopts
// those it finds, and then loads every message the earlier runs posted:
// the answer edits them rather than posting them again. The intents stay
// until the turn is over (sweepIntents), so a run killed before that
// leaves them to the next.
func (t *turn) recoverDelivery(ctx context.Context) {
	intents, err := t.deps.Ledger.Intents(ctx, t.ev.ID)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to look up the messages an earlier run was sending")
	}
	prev, err := t.deps.Ledger.Replies(ctx, t.ev.ID)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to look up an earlier reply")
		return
	}
	t.mu.Lock()
	t.pending = intents
	t.mu.Unlock()
	look := firstPerKey(intents)
	for attempt := 0; len(look) > 0 && attempt < 2; attempt++ {
		if attempt > 0 {
			// A killed request may still be on its way through the
			// homeserver: give it a moment before posting anew.
			select {
			case <-ctx.Done():
				return
			case <-time.After(recheckDelay):
			}
		}
		look = t.adopt(ctx, look, &prev)
	}
	t.mu.Lock()
	for _, r := range prev {
		if r.Part == 0 {
			t.reply, t.visible = r.EventID, true
		} else {
			t.earlier = append(t.earlier, r)
		}
	}
	reply := t.reply
	t.mu.Unlock()
	if reply != "" {
		t.deps.Index.Alias(reply, t.ev.ID)
	}
}

// adopt looks for the messages of intents whose parts have no message in
// prev yet, and records (and adds to prev) those it finds. It returns the
// intents it found nothing for.
func (t *turn) adopt(ctx context.Context, intents []tracking.Intent, prev *[]tracking.Reply) (missing []tracking.Intent) {
	for _, in := range intents {
		acct := t.accountOf(in.Sender)
		if acct == nil || slices.ContainsFunc(*prev, func(r tracking.Reply) bool { return r.Part == in.Part }) {
			continue // the part has its message; copies go in sweepIntents
		}
		found, err := acct.FindSent(ctx, in.Room, in.Since, in.TxnKey)
		switch {
		case len(found) > 0:
			t.log.Info().Stringer("reply", found[0]).Int("part", in.Part).Msg("found a message an earlier run posted; editing it")
			r := tracking.Reply{Part: in.Part, EventID: found[0], Sender: in.Sender}
			t.recordReply(ctx, r)
			*prev = append(*prev, r)
		case err == nil:
			missing = append(missing, in)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, matrixio.ErrSentUnknown):
			t.log.Error().Err(err).Int("part", in.Part).Msg("cannot tell whether an earlier run posted a message; it may show twice")
		default:
			t.log.Warn().Err(err).Int("part", in.Part).Msg("cannot tell whether an earlier run posted a message; it may show twice")
		}
	}
	return missing
}

// accountOf returns the account that sent as user (the sender of an
// intent): the turn's own, or another managed account of the turn's
// world; nil when none.
func (t *turn) accountOf(user id.UserID) Account {
	if user == t.acct.UserID() {
		return t.acct
	}
	if t.spec.Accounts != nil {
		return t.spec.Accounts(user)
	}
	return nil
}

// firstPerKey returns the first (oldest) of the intents with each
// transaction key: its sync position covers the later ones' sends too.
func firstPerKey(intents []tracking.Intent) []tracking.Intent {
	var out []tracking.Intent
	for _, in := range intents {
		if !slices.ContainsFunc(out, func(o tracking.Intent) bool {
			return o.TxnKey == in.TxnKey && o.Room == in.Room && o.Sender == in.Sender
		}) {
			out = append(out, in)
		}
	}
	return out
}

// sweepIntents runs when a turn is over whose delivery was uncertain: it
// was replayed with intents of earlier runs left, or one of its own sends
// failed in a way that may have posted it. It looks once more for each
// such message, and redacts every copy the turn's answer does not use: a
// request of a killed run that reached the homeserver only after the
// replay looked for it, a send repeated without the homeserver
// recognising it. Then it forgets the intents.
func (t *turn) sweepIntents(ctx context.Context) {
	t.mu.Lock()
	pending, unconfirmed, unrecorded := len(t.pending) > 0, t.unconfirmed, t.unrecorded
	t.mu.Unlock()
	if !pending && !unconfirmed {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	intents, err := t.deps.Ledger.Intents(ctx, t.ev.ID)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to look up the messages the turn was sending")
		return
	}
	replies, err := t.deps.Ledger.Replies(ctx, t.ev.ID)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to look up the turn's replies")
		unrecorded = true
	}
	used := map[id.EventID]bool{}
	for _, r := range replies {
		used[r.EventID] = true
	}
	t.mu.Lock()
	used[t.reply] = true
	t.mu.Unlock()
	for _, in := range firstPerKey(intents) {
		acct := t.accountOf(in.Sender)
		if acct == nil {
			continue
		}
		found, err := acct.FindSent(ctx, in.Room, in.Since, in.TxnKey)
		if err != nil {
			t.log.Warn().Err(err).Int("part", in.Part).Msg("cannot tell whether a message was posted twice")
		}
		for _, evID := range found {
			if used[evID] || unrecorded {
				continue
			}
			if _, err := acct.Redact(ctx, in.Room, evID, "duplicate"); err != nil {
				t.log.Warn().Err(err).Stringer("reply", evID).Msg("failed to remove a message posted twice")
			} else {
				t.log.Warn().Stringer("reply", evID).Int("part", in.Part).Msg("removed a message that was posted late, after the answer")
			}
		}
	}
	// The turn is over: nothing looks for these messages again.
	for _, in := range intents {
		if err := t.deps.Ledger.ForgetIntent(ctx, t.ev.ID, in); err != nil {
			t.log.Warn().Err(err).Int("part", in.Part).Msg("failed to forget a delivery intent")
		}
	}
}
