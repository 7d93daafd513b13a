package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// blockHeader is Block's first line.
const blockHeader = "What you remember that may be relevant (person: about the person you are answering; room: about this room; agent: general):"

// ItemKey is the key of the enrichment item recalled memories go in.
const ItemKey = "memory"

// Block renders memories as the text of the enrichment item: one line per
// memory, "- [ID] (scope) text", sorted by creation time and then id — not
// by rank — so the same memories always give the same bytes, whatever order
// Recall found them in, and prompt caches and replays line up. It returns ""
// for no memories.
//
//	What you remember that may be relevant (person: about the person you are answering; room: about this room; agent: general):
//	- [mab3k9xq2] (person) Alice is allergic to peanuts.
//	- [mcd7fh2rt] (room) This room plans the summer party.
func Block(memories []Memory) string {
	if len(memories) == 0 {
		return ""
	}
	sorted := slices.Clone(memories)
	slices.SortFunc(sorted, func(a, b Memory) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	var b strings.Builder
	b.WriteString(blockHeader)
	for _, m := range sorted {
		fmt.Fprintf(&b, "\n- [%s] (%s) %s", m.ID, m.Scope, m.Text)
	}
	return b.String()
}

// Item returns memories as the message:enrich item (key ItemKey), and false
// when there are none (add no item then). The item is transient: sent to
// the model for this turn only, never stored in session history, so that a
// memory forgotten with !memory forget is gone from the very next request —
// it is recalled afresh on every turn instead.
func Item(memories []Memory) (hooks.EnrichmentItem, bool) {
	text := Block(memories)
	if text == "" {
		return hooks.EnrichmentItem{}, false
	}
	return hooks.EnrichmentItem{Key: ItemKey, Text: text, CachePolicy: hooks.Volatile, Transient: true}, true
}

// EncryptedFunc reports whether a room is end-to-end encrypted; the bot
// supplies it. nil means no room is.
type EncryptedFunc func(ctx context.Context, room id.RoomID) bool

func (f EncryptedFunc) is(ctx context.Context, room id.RoomID) bool { return f != nil && f(ctx, room) }

// WhoForTurn is the Who of a turn: the agent answering, the requester and
// the room of the envelope.
func WhoForTurn(ctx context.Context, env hooks.Envelope, agent hooks.AgentName, encrypted EncryptedFunc) Who {
	return Who{Agent: agent, Person: env.RequesterID, Room: env.RoomID, Encrypted: encrypted.is(ctx, env.RoomID)}
}

// Enrich is the message:enrich collector: it recalls the memories most
// relevant to the message for the requester in the room and adds them as
// one transient item (Item). It adds nothing when the agent has no memory or
// nothing is relevant. The hook's deadline (2 s by default) bounds the
// embeddings request too.
func (s *Store) Enrich(ctx context.Context, c *hooks.MessageEnrichContext, encrypted EncryptedFunc) error {
	agent := cmp.Or(c.TargetAgent, c.Envelope.AgentName)
	if !s.Options(agent).Enabled || c.Envelope.RequesterID == "" {
		return nil
	}
	mems, err := s.Recall(ctx, WhoForTurn(ctx, c.Envelope, agent, encrypted), c.Envelope.Body, 0)
	if err != nil {
		return err
	}
	if it, ok := Item(mems); ok {
		c.Items = append(c.Items, it)
	}
	return nil
}

// EnrichHook returns the message:enrich hook (named "recall") that runs
// Enrich, for the bot's built-in "memory" plugin. An operator sees it in the
// hook list like any other and may reorder, override or disable it.
func EnrichHook(s *Store, encrypted EncryptedFunc, opts ...hooks.Option) hooks.Hook {
	return hooks.Handle(hooks.MessageEnrich, "recall", func(ctx context.Context, c *hooks.MessageEnrichContext) error {
		return s.Enrich(ctx, c, encrypted)
	}, opts...)
}

// Listing renders memories for !memory as Markdown lines, in the given
// order (List's: oldest first): "- `ID` (scope, told DATE) text". It
// returns "" for no memories; the bot adds its own heading and the hint
// about !memory forget.
func Listing(memories []Memory) string {
	var b strings.Builder
	for i, m := range memories {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- `%s` (%s, %s) %s", m.ID, m.Scope, m.CreatedAt.UTC().Format("2006-01-02"), m.Text)
	}
	return b.String()
}
