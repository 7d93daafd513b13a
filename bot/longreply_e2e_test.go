package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
)

// A reply far longer than one event arrives whole, in several messages in
// the thread: the streamed placeholder becomes the first part, the rest
// follow.
func TestLongReplyArrivesInParts(t *testing.T) {
	e := newTurnEnv(t, []string{"helper"}, "")
	var b strings.Builder
	for i := 0; b.Len() < 150_000; i++ {
		fmt.Fprintf(&b, "Paragraph %d. Ünïcödé text with <tags> & entities, **bold**, 🙂 and more words to fill the line.\n\n", i)
	}
	long := strings.TrimSpace(b.String())
	e.llm.Script(llmtest.Reply{Text: llmtest.Split(long, 60), ChunkDelay: 20 * time.Millisecond})
	q := e.say("write me a book", "")
	if got := e.waitTerminal(1); len(got) != 1 || got[0] != "after:"+long {
		t.Fatalf("terminal %d events, want after_response with the whole text", len(got))
	}
	if kind := e.results[0].DeliveryKind; kind != hooks.DeliveryEdited {
		t.Errorf("delivery %s, want the streamed placeholder edited", kind)
	}
	// Dendrite's relations lag a moment behind the sends: poll until the
	// final edit of the placeholder shows.
	var parts []string
	testkit.Until(t, 30*time.Second, func() (bool, string) {
		parts = e.threadTexts(q, e.results[0].EventID)
		got := strings.Join(parts, "")
		return got == long, fmt.Sprintf("waiting until the %d parts in the thread (%d bytes) join to the %d bytes of the reply", len(parts), len(got), len(long))
	})
	if len(parts) < 2 {
		t.Fatalf("%d agent messages in the thread, want several", len(parts))
	}
}

// threadTexts returns what the helper agent's messages in the thread of q
// show, in order: edited is the message whose latest edit counts.
func (e *turnEnv) threadTexts(q, edited id.EventID) []string {
	e.t.Helper()
	rels, err := e.person.Client.GetRelations(context.Background(), e.room, q, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	var texts []string
	for _, ev := range rels.Chunk {
		if ev.Sender != e.userID("helper") {
			continue
		}
		if ev.ID == edited {
			text, _, _ := e.visibleText(ev.ID)
			texts = append(texts, text)
			continue
		}
		_ = ev.Content.ParseRaw(ev.Type)
		texts = append(texts, ev.Content.AsMessage().Body)
	}
	return texts
}

// When a reply cannot be delivered, the person is told in the thread.
func TestUndeliverableReplyIsExplained(t *testing.T) {
	// A claim whose extra content alone is over the size of an event: no
	// part of it can be sent.
	e := newTurnEnv(t, []string{"helper"}, "", hooks.Handle(hooks.MessageClaim, "huge", func(_ context.Context, c *hooks.MessageClaimContext) error {
		c.Claimed = &hooks.ClaimResponse{Text: "claimed", Extra: map[string]any{"com.example.blob": strings.Repeat("x", 70_000)}}
		return nil
	}))
	q := e.say("hi", "")
	if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:delivery_failed"}) {
		t.Fatalf("terminal %v", got)
	}
	if text, _, _ := e.visibleText(e.waitForAgentMessage(q)); !strings.HasPrefix(text, "⚠️ Sorry, I could not deliver") {
		t.Errorf("the person sees %q, want a short notice", text)
	}
}
