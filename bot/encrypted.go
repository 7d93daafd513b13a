package bot

import (
	"context"
	"errors"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
)

// undecryptableNotice is what the room is told about a message hookroom
// cannot read.
const undecryptableNotice = "I can't read this message — its encryption keys never reached me. " +
	"Please send it again. If this keeps happening, check that your client shares room keys with unverified devices."

// handleEncrypted handles an event that arrived encrypted and could not be
// decrypted when it was synced (usually its room key came later). It waits
// for the key (matrix.encryption.decrypt_grace_ms; the room's later events
// wait with it, so their order is kept) and then handles the plaintext like
// any event. When the key never comes, a person's message gets a short
// notice in its thread, replying to it, once (the event is marked handled
// afterwards), and a warning in the log; an edit or a reaction gets
// nothing (an info line).
func (b *Bot) handleEncrypted(ctx context.Context, w *world, ev *event.Event, replayed bool) bool {
	log := zerolog.Ctx(ctx).With().Stringer("sender", ev.Sender).Logger()
	dec, err := b.mx.Decrypt(ctx, ev)
	if err == nil {
		log.Debug().Msg("decrypted a message whose keys arrived late")
		return b.handle(ctx, w, dec, replayed)
	}
	if ctx.Err() != nil || !errors.Is(err, matrixio.ErrUndecryptable) {
		return false // stopping: the event stays unhandled and is tried again next start
	}
	if w.isManaged(ev.Sender) {
		log.Warn().Err(err).Msg("cannot decrypt a message of one of hookroom's own accounts")
		return false
	}
	// The notice goes where an answer to the message would: into its
	// thread (the one it is in, or the one it starts), replying to it.
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "undecryptable"), Notice: true, PlainText: true, ReplyTo: ev.ID}
	if rel := ev.Content.AsEncrypted().RelatesTo; rel != nil {
		switch rel.Type {
		case event.RelReplace, event.RelAnnotation:
			log.Info().Err(err).Str("relation", string(rel.Type)).Msg("cannot decrypt an edit or a reaction; nothing to answer")
			return false
		case event.RelThread:
			opts.ThreadRoot = rel.EventID
		}
	}
	if opts.ThreadRoot == "" && w.threadMode(ev.RoomID) != config.ThreadModeRoom {
		opts.ThreadRoot = ev.ID
	}
	if !b.authorized(w, ev.Sender, ev.RoomID) {
		log.Info().Err(err).Msg("cannot decrypt a message of someone not authorized here; not answering")
		return false
	}
	log.Warn().Err(err).Msg("cannot decrypt a message; telling the room")
	if _, err := b.speakerIn(w, ev.RoomID).SendText(ctx, ev.RoomID, undecryptableNotice, opts); err != nil {
		log.Warn().Err(err).Msg("failed to tell the room about a message that cannot be decrypted")
	}
	return false
}
