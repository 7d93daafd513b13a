package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/tracking"
)

// secret is what the person writes in the messages they then delete.
const secret = "my bank PIN is 4711"

// bodies records the bodies message:received saw, in order.
type bodies struct {
	mu   sync.Mutex
	seen []string
}

func (b *bodies) hook() hooks.Hook {
	return hooks.Handle(hooks.MessageReceived, "bodies", func(_ context.Context, c *hooks.MessageReceivedContext) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.seen = append(b.seen, c.Envelope.Body)
		return nil
	})
}

func (b *bodies) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen)
}

// redact redacts the person's message evID.
func (e *turnEnv) redact(evID id.EventID) id.EventID {
	e.t.Helper()
	resp, err := e.person.Client.RedactEvent(context.Background(), e.room, evID, mautrix.ReqRedact{Reason: "sent by mistake"})
	if err != nil {
		e.t.Fatalf("redact: %v", err)
	}
	return resp.EventID
}

// pendingIn returns the unhandled events in the database of a stopped bot.
func pendingIn(t *testing.T, cfg *config.Config) []id.EventID {
	t.Helper()
	ctx := context.Background()
	db, err := OpenDatabase(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, err := tracking.New(db.Database).Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []id.EventID
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

// waitUntil waits up to 30 s until cond holds.
func (e *turnEnv) waitUntil(what string, cond func() bool) {
	e.t.Helper()
	testkit.Eventually(e.t, 30*time.Second, what, cond)
}

// pending reports whether the bot's inbox holds evID unhandled.
func (e *turnEnv) pending(evID id.EventID) bool {
	evs, err := e.bot.bot.track.Pending(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return slices.ContainsFunc(evs, func(ev *event.Event) bool { return ev.ID == evID })
}

// history returns the stored history of the thread rooted at root.
func (e *turnEnv) history(root id.EventID) []agents.Message {
	e.t.Helper()
	msgs, err := e.bot.bot.history.Load(context.Background(), agents.NewScopeKey(e.room, root))
	if err != nil {
		e.t.Fatal(err)
	}
	return msgs
}

// modelSaw reports whether any model request so far contained s.
func (e *turnEnv) modelSaw(s string) bool {
	for _, r := range e.llm.Requests() {
		if strings.Contains(string(r.Raw), s) {
			return true
		}
	}
	return false
}

// inboxHolds reports whether the inbox's stored copy of evID contains s.
func (e *turnEnv) inboxHolds(evID id.EventID, s string) bool {
	e.t.Helper()
	var raw string
	if err := e.bot.bot.db.QueryRow(context.Background(), `SELECT raw FROM tracking_inbox WHERE event_id = $1`, evID).Scan(&raw); err != nil {
		e.t.Fatalf("inbox row of %s: %v", evID, err)
	}
	return strings.Contains(raw, s)
}

// redacted reports whether the homeserver serves evID redacted.
func (e *turnEnv) redacted(evID id.EventID) bool {
	ev, err := e.person.Client.GetEvent(context.Background(), e.room, evID)
	return err == nil && ev.Unsigned.RedactedBecause != nil
}

// holdFirst is a message:received hook that holds the room's queue at the
// message "first" until release is closed (or the turn's context ends);
// entered is closed when it first gets there.
func holdFirst() (gate hooks.Hook, entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate = hooks.Handle(hooks.MessageReceived, "gate", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
		if c.Envelope.Body == "first" {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})
	return gate, entered, release
}

// waitEntered waits up to 30 s for holdFirst's entered.
func waitEntered(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the first message never reached message:received")
	}
}

// A message redacted before its turn started is never answered and never
// reaches the model or the history; the inbox keeps its row, not its text.
func TestRedactedBeforeTheTurn(t *testing.T) {
	t.Run("queued in the room's dispatcher", func(t *testing.T) {
		// message:received of the first message holds the room's queue
		// until the second message and its redaction are recorded.
		gate, entered, release := holdFirst()
		var seen bodies
		e := newTurnEnv(t, []string{"helper"}, "", gate, seen.hook())
		e.llm.Script(llmtest.Text("answer one"), llmtest.Text("answer three"))
		e.say("first", "")
		waitEntered(t, entered)
		q2 := e.say("second: "+secret, "")
		red := e.redact(q2)
		e.waitUntil("the redaction is recorded", func() bool { return e.pending(red) })
		close(release)
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"after:answer one"}) {
			t.Fatalf("terminal %v", got)
		}
		// The barrier: the room's queue handles the third message after
		// the second, so once the third is answered the second is done.
		e.say("third", "")
		if got := e.waitTerminal(2); !slices.Equal(got, []string{"after:answer one", "after:answer three"}) {
			t.Fatalf("terminal %v, want the first and third answered and nothing for the second", got)
		}
		if got := seen.list(); !slices.Equal(got, []string{"first", "third"}) {
			t.Errorf("message:received saw %q, want the redacted message skipped", got)
		}
		if n := e.llm.Count(); n != 2 || e.modelSaw(secret) {
			t.Errorf("%d model calls (saw the redacted text: %v), want 2 without it", n, e.modelSaw(secret))
		}
		if h := e.history(q2); len(h) != 0 {
			t.Errorf("history of the redacted message's thread: %v", h)
		}
		if e.inboxHolds(q2, "bank PIN") {
			t.Error("the inbox still holds the redacted text")
		}
		e.waitUntil("the redaction is handled", func() bool { return !e.pending(red) && !e.pending(q2) })
	})

	t.Run("recorded, then replayed after a restart", func(t *testing.T) {
		// The room's queue is held as above; the bot stops with the
		// redacted message still unhandled in the inbox, and its next run
		// replays it without the note the first run kept in memory.
		gate, entered, release := holdFirst()
		var seen bodies
		e := newTurnEnv(t, []string{"helper"}, "", gate, seen.hook())
		e.llm.Script(llmtest.Text("answer one"), llmtest.Text("answer three"))
		q1 := e.say("first", "")
		waitEntered(t, entered)
		q2 := e.say("second: "+secret, "")
		red := e.redact(q2)
		e.waitUntil("the redaction is recorded", func() bool { return e.pending(red) })
		e.bot.stop(t)
		if left := pendingIn(t, e.config(e.cfg)); !slices.Contains(left, q2) || !slices.Contains(left, red) {
			t.Fatalf("unhandled after the stop: %v, want the redacted message and its redaction", left)
		}
		close(release)
		e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"after:answer one"}) {
			t.Fatalf("terminal %v", got)
		}
		e.say("third", "")
		if got := e.waitTerminal(2); !slices.Equal(got, []string{"after:answer one", "after:answer three"}) {
			t.Fatalf("terminal %v, want the first and third answered and nothing for the second", got)
		}
		if got := seen.list(); slices.Contains(got, "second: "+secret) || !slices.Contains(got, "third") {
			t.Errorf("message:received saw %q, want the redacted message skipped", got)
		}
		if n := e.llm.Count(); n != 2 || e.modelSaw(secret) {
			t.Errorf("%d model calls (saw the redacted text: %v), want 2 without it", n, e.modelSaw(secret))
		}
		if len(e.history(q1)) != 2 || len(e.history(q2)) != 0 {
			t.Errorf("histories: first %d messages, redacted %d; want 2 and 0", len(e.history(q1)), len(e.history(q2)))
		}
		e.waitUntil("the redaction is handled", func() bool { return !e.pending(red) && !e.pending(q2) })
	})

	t.Run("queued behind its thread's running turn", func(t *testing.T) {
		release := make(chan struct{})
		var seen bodies
		e := newTurnEnv(t, []string{"helper"}, "", seen.hook())
		e.llm.Script(llmtest.Text("answer one").WithHold(release), llmtest.Text("answer three"))
		q1 := e.say("first", "")
		e.waitUntil("the first turn calls the model", func() bool { return e.llm.Count() == 1 })
		q2 := e.say("second: "+secret, q1)
		e.rec.waitFor(t, fmt.Sprintf("msg:%s:%s", e.room, q2), 1, 30*time.Second)
		e.redact(q2)
		e.waitUntil("the queued turn is stopped", func() bool { return e.bot.bot.turnsByEvent.StoppedWhileQueued(q2) })
		close(release)
		want := []string{"after:answer one", "cancelled:redacted"}
		if got := e.waitTerminal(2); !slices.Equal(got, want) {
			t.Fatalf("terminal %v, want %v", got, want)
		}
		e.say("third", q1)
		if got := e.waitTerminal(3); got[2] != "after:answer three" {
			t.Fatalf("terminal %v", got)
		}
		if n := e.llm.Count(); n != 2 || e.modelSaw(secret) {
			t.Errorf("%d model calls (saw the redacted text: %v), want 2 without it", n, e.modelSaw(secret))
		}
		h := e.history(q1)
		if len(h) != 4 || slices.ContainsFunc(h, func(m agents.Message) bool { return strings.Contains(m.Content, "bank PIN") }) {
			t.Errorf("thread history %+v, want the first and third turns only", h)
		}
		if e.inboxHolds(q2, "bank PIN") {
			t.Error("the inbox still holds the redacted text")
		}
	})
}

// Redacting a message whose answer is streaming stops the turn
// (message:cancelled, reason redacted) and removes the placeholder; the
// message never enters the history.
func TestRedactedWhileStreaming(t *testing.T) {
	e := newTurnEnv(t, []string{"helper"}, "")
	e.llm.Script(
		llmtest.Reply{Text: llmtest.Split(strings.Repeat("word ", 200), 200), ChunkDelay: 50 * time.Millisecond},
		llmtest.Text("answer after"),
	)
	q := e.say("write a long essay about "+secret, "")
	reply := e.waitForAgentMessage(q)
	e.waitUntil("the reply streams", func() bool { _, edits, _ := e.visibleText(reply); return edits > 0 })
	e.redact(q)
	if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:redacted"}) {
		t.Fatalf("terminal %v", got)
	}
	e.waitUntil("the streamed reply is redacted", func() bool { return e.redacted(reply) })
	if h := e.history(q); len(h) != 0 {
		t.Errorf("history of the redacted message's thread: %v", h)
	}
	// The next message is answered as usual, without the redacted one.
	e.say("hello", "")
	if got := e.waitTerminal(2); got[1] != "after:answer after" {
		t.Fatalf("terminal %v", got)
	}
	if last := e.llm.LastRequest(t); strings.Contains(string(last.Raw), "bank PIN") {
		t.Error("the next turn's prompt holds the redacted text")
	}
}

// Redacting a message that was answered already takes its turn out of the
// history and redacts the answer.
func TestRedactedAfterTheAnswer(t *testing.T) {
	e := newTurnEnv(t, []string{"helper"}, "")
	e.llm.Script(llmtest.Text("I will remember that."), llmtest.Text("What secret?"))
	q := e.say(secret, "")
	if got := e.waitTerminal(1); got[0] != "after:I will remember that." {
		t.Fatalf("terminal %v", got)
	}
	answer := e.results[0].EventID
	if h := e.history(q); len(h) != 2 {
		t.Fatalf("history before the redaction: %v", h)
	}
	red := e.redact(q)
	e.waitUntil("the answer is redacted", func() bool { return e.redacted(answer) })
	e.waitUntil("the redaction is handled", func() bool { return !e.pending(red) })
	if h := e.history(q); len(h) != 0 {
		t.Errorf("history after the redaction: %+v", h)
	}
	// A follow-up in the same thread reaches the model without it.
	e.say("what did I tell you?", q)
	if got := e.waitTerminal(2); got[1] != "after:What secret?" {
		t.Fatalf("terminal %v", got)
	}
	if last := e.llm.LastRequest(t); strings.Contains(string(last.Raw), "bank PIN") || strings.Contains(string(last.Raw), "remember that") {
		t.Errorf("the follow-up's prompt holds the forgotten turn:\n%s", last.Raw)
	}
}
