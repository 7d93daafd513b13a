package matrixio

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
	"maunium.net/go/mautrix/id"
)

// SendOptions shape a text message sent with Account.SendText or an edit
// made with Account.Edit. The zero value sends a plain, unthreaded m.text
// message that mentions nobody, with a transaction id derived from its
// content.
type SendOptions struct {
	// TxnKey makes the send idempotent: sending again with the same key
	// (into the same room, from the same device) returns the event that was
	// already sent instead of posting twice, also after a restart. Derive
	// it with TxnKey(sourceEvent, stage). Empty derives the key from the
	// content, so identical content sent twice within the homeserver's
	// transaction window collapses into one event.
	TxnKey string

	// ThreadRoot puts the message in the thread rooted at that event
	// (rel_type m.thread).
	ThreadRoot id.EventID
	// ThreadFallback is the latest event in the thread, referenced as the
	// reply fallback (m.in_reply_to with is_falling_back) for clients that
	// do not show threads. Empty uses ThreadRoot. See
	// Account.LatestThreadEvent.
	ThreadFallback id.EventID
	// ReplyTo makes the message a real reply to that event (m.in_reply_to
	// without is_falling_back), inside the thread if ThreadRoot is set.
	ReplyTo id.EventID

	// Mentions are the users the message pings (m.mentions). Users linked
	// with matrix.to pills in the Markdown are added. Nobody else is pinged.
	Mentions []id.UserID
	// MentionRoom pings the whole room (@room).
	MentionRoom bool

	// Notice sends m.notice instead of m.text (for bot status output).
	Notice bool
	// PlainText sends the text as is, without rendering Markdown.
	PlainText bool

	// Extra holds additional top-level content fields (e.g. hookroom
	// metadata). They cannot override the fields matrixio sets. On edits
	// they are set on the edit event and inside m.new_content.
	Extra map[string]any
}

// renderText builds the content of a text message: Markdown rendered to
// sanitized HTML (raw HTML in the input is escaped), the original text as
// the plain body, explicit mentions, no relations.
func renderText(text string, opts SendOptions) *event.MessageEventContent {
	var content event.MessageEventContent
	if opts.PlainText {
		content = format.TextToContent(text)
	} else {
		content = format.RenderMarkdown(text, true, false)
		content.Body = text
	}
	return finishContent(content, opts)
}

// finishContent sets what renderText adds to the rendered text: the message
// type and the mentions.
func finishContent(content event.MessageEventContent, opts SendOptions) *event.MessageEventContent {
	content.MsgType = event.MsgText
	if opts.Notice {
		content.MsgType = event.MsgNotice
	}
	mentions := &event.Mentions{Room: opts.MentionRoom}
	if content.Mentions != nil {
		for _, u := range content.Mentions.UserIDs {
			mentions.Add(u)
		}
	}
	for _, u := range opts.Mentions {
		mentions.Add(u)
	}
	slices.Sort(mentions.UserIDs)
	content.Mentions = mentions
	return &content
}

// textContent is the full content SendText sends: renderText plus
// relations plus Extra.
func textContent(text string, opts SendOptions) *event.Content {
	return textContentOf(renderText(text, opts), opts)
}

// textContentOf is textContent for a text already rendered.
func textContentOf(msg *event.MessageEventContent, opts SendOptions) *event.Content {
	switch {
	case opts.ThreadRoot != "" && opts.ReplyTo != "":
		msg.RelatesTo = (&event.RelatesTo{}).SetThread(opts.ThreadRoot, "").SetReplyTo(opts.ReplyTo)
	case opts.ThreadRoot != "":
		fallback := opts.ThreadFallback
		if fallback == "" {
			fallback = opts.ThreadRoot
		}
		msg.RelatesTo = (&event.RelatesTo{}).SetThread(opts.ThreadRoot, fallback)
	case opts.ReplyTo != "":
		msg.RelatesTo = (&event.RelatesTo{}).SetReplyTo(opts.ReplyTo)
	}
	return &event.Content{Parsed: msg, Raw: maps.Clone(opts.Extra)}
}

// editContent is the full content Edit sends: an m.replace of target whose
// m.new_content is the rendered text (with Extra inside too).
func editContent(target id.EventID, text string, opts SendOptions) *event.Content {
	return editContentOf(target, renderText(text, opts), opts)
}

// editContentOf is editContent for a text already rendered.
func editContentOf(target id.EventID, msg *event.MessageEventContent, opts SendOptions) *event.Content {
	msg.SetEdit(target)
	var raw map[string]any
	if len(opts.Extra) > 0 {
		raw = maps.Clone(opts.Extra)
		raw["m.new_content"] = maps.Clone(opts.Extra)
	}
	return &event.Content{Parsed: msg, Raw: raw}
}

// SendText sends text (Markdown) to room and returns the event id. See
// SendOptions for threads, replies, mentions and idempotency. Rate limits,
// server errors and network errors are retried under the same transaction
// id; a retry after a network or server error first looks for the earlier
// attempt's event (FindSent), so a retry does not post twice even when the
// homeserver does not remember the transaction id.
func (a *Account) SendText(ctx context.Context, room id.RoomID, text string, opts SendOptions) (id.EventID, error) {
	return a.SendEvent(ctx, room, event.EventMessage, textContent(text, opts), opts.TxnKey)
}

// Edit replaces the text of target (an event this account sent) with
// newText (m.replace with m.new_content) and returns the edit's event id.
// Thread and reply options are ignored: an edit keeps the original's
// relations. Streaming callers should throttle edits (homeservers rate-limit
// message events; Synapse's default allows about one per few seconds).
func (a *Account) Edit(ctx context.Context, room id.RoomID, target id.EventID, newText string, opts SendOptions) (id.EventID, error) {
	return a.SendEvent(ctx, room, event.EventMessage, editContent(target, newText, opts), opts.TxnKey)
}

// React annotates target with key (usually an emoji) and returns the
// reaction's event id. Reacting twice with the same key collapses into one
// event within the homeserver's transaction window.
func (a *Account) React(ctx context.Context, room id.RoomID, target id.EventID, key string) (id.EventID, error) {
	content := &event.ReactionEventContent{RelatesTo: *(&event.RelatesTo{}).SetAnnotation(target, key)}
	return a.SendEvent(ctx, room, event.EventReaction, content, "")
}

// SendEvent sends a message event of any type with content (anything that
// marshals to a JSON object) and returns its event id. txnKey works as
// SendOptions.TxnKey; empty derives it from the content.
func (a *Account) SendEvent(ctx context.Context, room id.RoomID, evtType event.Type, content any, txnKey string) (id.EventID, error) {
	if txnKey == "" {
		var err error
		if txnKey, err = contentTxnKey(content); err != nil {
			return "", err
		}
	}
	evtType.Class = event.MessageEventType
	txnID := wireTxnID(txnKey, room, evtType)
	// A send retried after a failure that may have posted the event looks
	// for it first (FindSent): homeservers do not reliably remember the
	// transaction id of a request whose answer was lost.
	since, posErr := a.SyncPosition(ctx)
	var lastErr error
	var resp *mautrix.RespSendEvent
	err := a.do(ctx, "send "+evtType.Type, retryTransient, func(ctx context.Context) (err error) {
		if posErr == nil && mayHaveActed(lastErr) {
			if found, ferr := a.findSent(ctx, room, since, txnID); ferr == nil && len(found) > 0 {
				resp = &mautrix.RespSendEvent{EventID: found[0]}
				return nil
			} else if ferr != nil {
				zerolog.Ctx(ctx).Warn().Err(ferr).Stringer("room_id", room).Msg("Could not look for the first attempt of a send; sending again")
			}
		}
		defer func() { lastErr = err }()
		sendType, sendContent := evtType, content
		if helper := a.cryptoHelper(); helper != nil {
			// In encrypted rooms mautrix encrypts messages itself; it needs
			// to know the room's state first, and leaves reactions to us.
			if err := a.prepareEncryptedRoom(ctx, room); err != nil {
				return err
			}
			if sendType, sendContent, err = a.encryptIfNeeded(ctx, helper, room, evtType, content); err != nil {
				return err
			}
		}
		resp, err = a.cli().SendMessageEvent(ctx, room, sendType, sendContent, mautrix.ReqSendEvent{TransactionID: txnID})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to send %s to %s: %w", evtType.Type, room, err)
	}
	return resp.EventID, nil
}

// Redact redacts target with an optional reason and returns the
// redaction's event id. Redacting the same event twice collapses into one
// redaction within the homeserver's transaction window.
func (a *Account) Redact(ctx context.Context, room id.RoomID, target id.EventID, reason string) (id.EventID, error) {
	txnID := wireTxnID(hashParts("redact", string(target), reason), room, event.EventRedaction)
	var resp *mautrix.RespSendEvent
	err := a.do(ctx, "redact", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().RedactEvent(ctx, room, target, mautrix.ReqRedact{Reason: reason, TxnID: txnID})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to redact %s in %s: %w", target, room, err)
	}
	return resp.EventID, nil
}

// SetTyping shows (typing=true, for at most timeout) or clears the typing
// notice of the account in room. Refresh it before timeout while still
// working; Dendrite rate-limits typing, so not more often than every ~20s.
func (a *Account) SetTyping(ctx context.Context, room id.RoomID, typing bool, timeout time.Duration) error {
	if !typing {
		timeout = 0
	}
	err := a.do(ctx, "typing", retryTransient, func(ctx context.Context) error {
		_, err := a.cli().UserTyping(ctx, room, typing, timeout)
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to set typing in %s: %w", room, err)
	}
	return nil
}

// LatestThreadEvent returns the newest event in the thread rooted at root,
// or root itself if the thread is empty: the event to pass as
// SendOptions.ThreadFallback. It asks /relations, because homeservers such
// as Dendrite send no thread summaries.
func (a *Account) LatestThreadEvent(ctx context.Context, room id.RoomID, root id.EventID) (id.EventID, error) {
	var resp *mautrix.RespGetRelations
	err := a.do(ctx, "thread relations", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().GetRelations(ctx, room, root, &mautrix.ReqGetRelations{
			RelationType: event.RelThread,
			Dir:          mautrix.DirectionBackward,
			Limit:        1,
		})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("failed to get thread of %s in %s: %w", root, room, err)
	}
	if len(resp.Chunk) == 0 {
		return root, nil
	}
	return resp.Chunk[0].ID, nil
}

// MarkRead moves the account's read receipt in room to evt, so people see
// that the agent has seen their message.
func (a *Account) MarkRead(ctx context.Context, room id.RoomID, evt id.EventID) error {
	err := a.do(ctx, "read receipt", retryTransient, func(ctx context.Context) error {
		return a.cli().MarkRead(ctx, room, evt)
	})
	if err != nil {
		return fmt.Errorf("failed to mark %s read in %s: %w", evt, room, err)
	}
	return nil
}
