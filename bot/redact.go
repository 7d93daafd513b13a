package bot

import (
	"context"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/turn"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/tracking"
)

// redactReason is the reason hookroom gives when it redacts its replies to
// a message that was redacted.
const redactReason = "the message it answered was deleted"

// handleRedaction handles a redaction sent by a person (hookroom's own
// redactions never get here). A redacted message is forgotten wherever
// hookroom holds it:
//
//   - the inbox blanks its stored content when it records the redaction
//     (tracking.Store.RecordBatch), and the dispatcher skips it if it was
//     not handled yet (handleSync notes the target before queueing the
//     batch; a replay sees it redacted in the inbox);
//   - its turn, queued behind others of its thread or running, is stopped
//     and ends with message:cancelled (reason redacted), without a notice;
//   - once that turn ended, its thread's queue runs forgetTurn: the turn
//     leaves the history (the person's message, tool calls and the answer:
//     an answer to a message that is gone would make no sense to the model
//     and often repeats the message) and the agent's replies to it, the
//     placeholder included, are redacted too.
//
// Redactions are honoured whoever sent them: the homeserver already checked
// that the sender may redact the event (its author or a moderator). It
// reports true: forgetTurn marks the redaction handled.
func (b *Bot) handleRedaction(ctx context.Context, ev *event.Event) bool {
	target := tracking.RedactionTarget(ev)
	log := zerolog.Ctx(ctx).With().Stringer("redacts", target).Logger()
	if target == "" {
		log.Debug().Msg("ignoring a redaction without a target")
		return false
	}
	b.dispatch.redactionHandled(target)
	scope, ok := b.turnsByEvent.Stop(target, turn.ErrRedacted, false)
	if ok {
		log.Info().Msg("stopping the turn of a redacted message")
	} else {
		// No turn in progress: nothing to wait for. The turn that may
		// have answered it long ago is found by its event id.
		scope = agents.ScopeKey("redaction/" + string(target)) // a queue of its own, not a conversation
	}
	b.turns.Run(ctx, scope, func(ctx context.Context) { b.forgetTurn(log.WithContext(ctx), ev, target) })
	return true
}

// forgetTurn removes what the turn of a redacted message left behind: its
// messages in the history and the agent's replies in the room. It runs in
// the thread's turn queue, after the turn ended and before the thread's
// next turn, and then marks the redaction handled. Cut short by a
// shutdown, the redaction stays unhandled and runs again after the
// restart.
func (b *Bot) forgetTurn(ctx context.Context, redaction *event.Event, target id.EventID) {
	log := zerolog.Ctx(ctx)
	if n, err := b.history.Forget(ctx, target); err != nil {
		log.Error().Err(err).Msg("failed to remove a redacted message from the history")
	} else if n > 0 {
		log.Info().Int64("messages", n).Msg("removed a redacted message's turn from the history")
	}
	replies, err := b.track.Replies(ctx, target)
	if err != nil {
		log.Error().Err(err).Msg("failed to look up the replies to a redacted message")
	}
	for _, r := range replies {
		acct := b.accountOf(r.Sender)
		if acct == nil {
			log.Debug().Stringer("reply", r.EventID).Msg("not redacting a reply whose account is not known")
			continue
		}
		if _, err := acct.Redact(ctx, redaction.RoomID, r.EventID, redactReason); err != nil {
			log.Warn().Err(err).Stringer("reply", r.EventID).Msg("failed to redact the reply to a redacted message")
		}
	}
	if len(replies) > 0 {
		log.Info().Int("replies", len(replies)).Msg("redacted the replies to a redacted message")
	}
	if ctx.Err() != nil {
		return
	}
	if err := b.track.MarkHandled(context.WithoutCancel(ctx), redaction.ID); err != nil {
		log.Error().Err(err).Msg("failed to mark the redaction handled; it will be replayed")
	}
}

// accountOf returns hookroom's account for user, or nil.
func (b *Bot) accountOf(user id.UserID) *matrixio.Account {
	if e, ok := b.w().accounts[user]; ok {
		return e.account
	}
	return nil
}
