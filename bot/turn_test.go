package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/tracking"
)

// These tests run a whole turn — claim, prompt, model stream, placeholder,
// streaming edits, final delivery, failure notices, replays — against a
// fake account and a paced model inside a testing/synctest bubble, so the
// delivery state machine's timing is exact and no homeserver is needed.
// The end-to-end tests (turn_e2e_test.go, crash_e2e_test.go…) show the
// same behaviour on a real Dendrite.

// fakeAccount is a Matrix account that answers in process. It records every
// request with the fake time it returned at, numbers the events it creates,
// and finds sent events by transaction key like a homeserver's /sync does.
// slow and fail let a test delay or fail requests.
type fakeAccount struct {
	user  id.UserID
	start time.Time
	slow  func(op accountOp) time.Duration
	fail  func(op accountOp) error

	mu   sync.Mutex
	ops  []accountOp
	next int
	sent map[string][]id.EventID // by transaction key
}

// accountOp is one request to a fakeAccount.
type accountOp struct {
	Kind   string // send, edit, redact, typing
	At     time.Duration
	Text   string
	Notice bool
	Target id.EventID // edit, redact
	Event  id.EventID // the event it created
	TxnKey string
	Typing bool
}

func (o accountOp) String() string {
	at := o.At.Round(time.Millisecond).String()
	switch o.Kind {
	case "send":
		kind := "send"
		if o.Notice {
			kind = "notice"
		}
		return fmt.Sprintf("%s %s %s %s", at, kind, o.Event, abbrev(o.Text))
	case "edit":
		return fmt.Sprintf("%s edit %s %s", at, o.Target, abbrev(o.Text))
	case "redact":
		return fmt.Sprintf("%s redact %s %s", at, o.Target, o.Text)
	default:
		return fmt.Sprintf("%s typing %v", at, o.Typing)
	}
}

// abbrev quotes s, or for a long s its start and its length.
func abbrev(s string) string {
	if len(s) <= 100 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:16], len(s))
}

var _ turn.Account = (*fakeAccount)(nil)

func newFakeAccount(user id.UserID) *fakeAccount {
	return &fakeAccount{user: user, start: time.Now(), sent: map[string][]id.EventID{}}
}

func (a *fakeAccount) UserID() id.UserID { return a.user }

// do runs op: it waits as long as slow says (or until ctx ends), fails it
// as fail says, and records it.
func (a *fakeAccount) do(ctx context.Context, op accountOp) (id.EventID, error) {
	if a.slow != nil {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(a.slow(op)):
		}
	}
	if a.fail != nil {
		if err := a.fail(op); err != nil {
			return "", err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if op.Kind != "typing" {
		a.next++
		op.Event = id.EventID(fmt.Sprintf("$%d", a.next))
		if op.TxnKey != "" {
			a.sent[op.TxnKey] = append(a.sent[op.TxnKey], op.Event)
		}
	}
	op.At = time.Since(a.start)
	a.ops = append(a.ops, op)
	return op.Event, nil
}

func (a *fakeAccount) SendText(ctx context.Context, _ id.RoomID, text string, opts matrixio.SendOptions) (id.EventID, error) {
	return a.do(ctx, accountOp{Kind: "send", Text: text, Notice: opts.Notice, TxnKey: opts.TxnKey})
}

func (a *fakeAccount) Edit(ctx context.Context, _ id.RoomID, target id.EventID, text string, opts matrixio.SendOptions) (id.EventID, error) {
	return a.do(ctx, accountOp{Kind: "edit", Target: target, Text: text, TxnKey: opts.TxnKey})
}

func (a *fakeAccount) Redact(ctx context.Context, _ id.RoomID, target id.EventID, reason string) (id.EventID, error) {
	return a.do(ctx, accountOp{Kind: "redact", Target: target, Text: reason})
}

func (a *fakeAccount) SetTyping(ctx context.Context, _ id.RoomID, typing bool, _ time.Duration) error {
	_, err := a.do(ctx, accountOp{Kind: "typing", Typing: typing})
	return err
}

func (a *fakeAccount) SyncPosition(context.Context) (string, error) { return "s0", nil }

func (a *fakeAccount) FindSent(_ context.Context, _ id.RoomID, _, txnKey string) ([]id.EventID, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sent[txnKey]), nil
}

// transcript is what the account was asked to do, a line per request,
// without the refreshes of a typing notice.
func (a *fakeAccount) transcript() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	typing := false
	for _, op := range a.ops {
		if op.Kind == "typing" && op.Typing && typing {
			continue // a refresh (every 15s): its order next to other requests at the same instant is chance
		}
		typing = op.Kind == "typing" && op.Typing || typing && op.Kind != "typing"
		out = append(out, op.String())
	}
	return out
}

// pacedModel streams pieces, one every gap, then finishes, or fails with
// err after the pieces.
type pacedModel struct {
	pieces []string
	gap    time.Duration
	err    error
}

func (m pacedModel) Stream(ctx context.Context, _ *agents.Request) (agents.Stream, error) {
	return &pacedStream{ctx: ctx, m: m}, nil
}

type pacedStream struct {
	ctx  context.Context
	m    pacedModel
	next int
	done bool
}

func (s *pacedStream) Recv() (agents.Event, error) {
	switch {
	case s.next < len(s.m.pieces):
		select {
		case <-s.ctx.Done():
			return agents.Event{}, &agents.ModelError{Kind: agents.ErrorCancelled, Message: "cancelled", Err: s.ctx.Err()}
		case <-time.After(s.m.gap):
		}
		s.next++
		return agents.Event{Kind: agents.EventText, Text: s.m.pieces[s.next-1]}, nil
	case s.m.err != nil:
		return agents.Event{}, s.m.err
	case !s.done:
		s.done = true
		return agents.Event{Kind: agents.EventFinish, FinishReason: agents.FinishStop}, nil
	}
	return agents.Event{}, io.EOF
}

func (s *pacedStream) Close() error { return nil }

// outcomes records how turns ended: message:after_response and
// message:cancelled, in order.
type outcomes struct {
	mu    sync.Mutex
	lines []string
}

func (o *outcomes) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
}

func (o *outcomes) hooks() []hooks.Hook {
	return []hooks.Hook{
		hooks.Handle(hooks.MessageAfterResponse, "after", func(_ context.Context, c *hooks.AfterResponseContext) error {
			o.add("after_response %s %s %s", c.Result.DeliveryKind, c.Result.EventID, abbrev(c.Result.Text))
			return nil
		}),
		hooks.Handle(hooks.MessageCancelled, "cancelled", func(_ context.Context, c *hooks.CancelledContext) error {
			o.add("cancelled %s %s", c.Info.Reason, c.Info.VisibleEventID)
			return nil
		}),
	}
}

// turnCase is one turn run by runTurn.
type turnCase struct {
	name      string
	streaming bool
	model     pacedModel
	slow      func(op accountOp) time.Duration
	fail      func(op accountOp) error
	hooks     []hooks.Hook // more hooks, after the recording ones
	// before runs before the turn: it may record what an earlier run of
	// the turn left (replays).
	before func(ctx context.Context, b *Bot, acct *fakeAccount) (replayed bool)
	// during runs next to the turn, from its start: it may stop the turn
	// or shut down.
	during func(b *Bot, shutdown context.CancelFunc)

	transcript []string
	outcome    []string
	unhandled  bool // the message is left for the restart
	// check, when set, checks more of what the account was asked.
	check func(t *testing.T, acct *fakeAccount)
}

const (
	turnRoom   id.RoomID  = "!room:example.org"
	turnSource id.EventID = "$question"
)

// unstartedBot returns a bot made by New for the configuration body
// (below data_dir and a matrix section for a homeserver it never talks
// to), with hs as its hooks, and a context logging to the test. The bot is
// closed at the test's end; Run is never called.
func unstartedBot(t *testing.T, body string, hs ...hooks.Hook) (context.Context, *Bot) {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`data_dir: %s
matrix: {homeserver: "http://127.0.0.1:9", server_name: example.org}
%s`, filepath.Join(t.TempDir(), "data"), body)), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).WithContext(context.Background())
	b, err := New(ctx, cfg, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{{Name: "test", Hooks: hs}}, hooks.Options{Services: s})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return ctx, b
}

// runTurn runs c's turn in a synctest bubble and checks what the account
// was asked to do, how the turn ended, and whether its message was marked
// handled.
func runTurn(t *testing.T, c turnCase) {
	synctest.Test(t, func(t *testing.T) {
		var out outcomes
		ctx, b := unstartedBot(t, fmt.Sprintf(`
models: {m: {provider: echo}}
agents: {helper: {model: m}}
defaults: {streaming: %v}
`, c.streaming), append(out.hooks(), c.hooks...)...)
		w := b.w()
		w.models["m"] = c.model

		ev := &event.Event{ID: turnSource, RoomID: turnRoom, Sender: "@alice:example.org", Type: event.EventMessage,
			Content: event.Content{Parsed: &event.MessageEventContent{MsgType: event.MsgText, Body: "hello?"}}}
		acct := newFakeAccount("@helper:example.org")
		acct.slow, acct.fail = c.slow, c.fail
		if _, err := b.track.Record(ctx, ev, acct.user); err != nil {
			t.Fatal(err)
		}
		replayed := false
		if c.before != nil {
			replayed = c.before(ctx, b, acct)
		}
		env := hooks.Envelope{RoomID: turnRoom, ResolvedThreadID: turnSource, SenderID: ev.Sender, RequesterID: ev.Sender, Body: "hello?"}
		tr := b.newTurn(ctx, w, ev, env, "helper", acct, b.Registry(), replayed)
		runCtx, shutdown := context.WithCancel(ctx)
		defer shutdown()
		if c.during != nil {
			go c.during(b, shutdown)
		}
		tr.Run(runCtx)
		b.typing.Wait()
		synctest.Wait()

		if got := acct.transcript(); !slices.Equal(got, c.transcript) {
			t.Errorf("the account was asked to\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(c.transcript, "\n\t"))
		}
		if !slices.Equal(out.lines, c.outcome) {
			t.Errorf("the turn ended with\n\t%s\nwant\n\t%s", strings.Join(out.lines, "\n\t"), strings.Join(c.outcome, "\n\t"))
		}
		if c.check != nil {
			c.check(t, acct)
		}
		pending, err := b.track.Pending(context.WithoutCancel(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if unhandled := len(pending) == 1; unhandled != c.unhandled || len(pending) > 1 {
			t.Errorf("%d messages unhandled, want the question unhandled = %v", len(pending), c.unhandled)
		}
	})
}

// killedWhileSending is a turnCase.before for a replay whose killed run
// recorded its intent to send the placeholder, which then landed as posted
// (more than once, when a retry was not recognised) without the run
// learning its event id.
func killedWhileSending(t *testing.T, posted ...id.EventID) func(ctx context.Context, b *Bot, acct *fakeAccount) bool {
	return func(ctx context.Context, b *Bot, acct *fakeAccount) bool {
		key := matrixio.TxnKey(turnSource, placeholderKey)
		in := tracking.Intent{Room: turnRoom, Part: 0, TxnKey: key, Run: "killed", Sender: acct.user, Since: "s0"}
		if err := b.track.IntendReply(ctx, turnSource, in); err != nil {
			t.Fatal(err)
		}
		acct.sent[key] = posted
		return true
	}
}

// longReply is too long for one message: about 90 KB.
var longReply = strings.Repeat("All work and no play. ", 4500)

// words streams "The quick brown fox jumps over" in six pieces.
var words = []string{"The ", "quick ", "brown ", "fox ", "jumps ", "over"}

const placeholderKey = "placeholder"

func TestTurnDelivery(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []turnCase{
		{
			name:      "a reply faster than the placeholder delay is one message",
			streaming: true,
			model:     pacedModel{pieces: words, gap: 50 * time.Millisecond},
			transcript: []string{
				`0s typing true`,
				`300ms send $1 "The quick brown fox jumps over"`,
				`300ms typing false`,
			},
			outcome: []string{`after_response sent $1 "The quick brown fox jumps over"`},
		},
		{
			name:      "a slow reply streams into the placeholder, at most one edit per interval",
			streaming: true,
			model:     pacedModel{pieces: words, gap: 500 * time.Millisecond},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`1.4s edit $1 "The quick  …"`,
				`2.4s edit $1 "The quick brown fox  …"`,
				`3s edit $1 "The quick brown fox jumps over"`,
				`3s typing false`,
			},
			outcome: []string{`after_response edited $1 "The quick brown fox jumps over"`},
		},
		{
			name:      "with streaming off the placeholder waits for the whole reply",
			streaming: false,
			model:     pacedModel{pieces: words, gap: 500 * time.Millisecond},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`3s edit $1 "The quick brown fox jumps over"`,
				`3s typing false`,
			},
			outcome: []string{`after_response edited $1 "The quick brown fox jumps over"`},
		},
		{
			name:      "an edit in flight when the reply completes lands before the final edit",
			streaming: true,
			model:     pacedModel{pieces: words, gap: 500 * time.Millisecond},
			slow: func(op accountOp) time.Duration {
				if op.Kind == "edit" {
					return 800 * time.Millisecond
				}
				return 0
			},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`2.2s edit $1 "The quick  …"`,
				`3.2s edit $1 "The quick brown fox  …"`,
				`4s edit $1 "The quick brown fox jumps over"`,
				`4s typing false`,
			},
			outcome: []string{`after_response edited $1 "The quick brown fox jumps over"`},
		},
		{
			name:      "a model error after some text: the placeholder says why",
			streaming: true,
			model: pacedModel{pieces: words[:3], gap: 500 * time.Millisecond,
				err: &agents.ModelError{Kind: agents.ErrorHTTP, StatusCode: 400, Message: "bad request"}},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`1.4s edit $1 "The quick  …"`,
				`1.5s edit $1 "⚠️ Sorry, I could not answer: the model returned an error."`,
				`1.5s typing false`,
			},
			outcome: []string{`cancelled model_error $1`},
		},
		{
			name:      "stopped with 🛑 while streaming: what was said stays, marked stopped",
			streaming: true,
			model:     pacedModel{pieces: words, gap: 500 * time.Millisecond},
			during: func(b *Bot, _ context.CancelFunc) {
				time.Sleep(1700 * time.Millisecond)
				b.turnsByEvent.Stop(turnSource, turn.ErrStopped, false)
			},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`1.4s edit $1 "The quick  …"`,
				`1.7s edit $1 "The quick brown \n\n🛑 Stopped."`,
				`1.7s typing false`,
			},
			outcome: []string{`cancelled cancelled_by_user $1`},
		},
		{
			name:      "a shutdown mid-stream leaves the message for the restart, with no notice",
			streaming: true,
			model:     pacedModel{pieces: words, gap: 500 * time.Millisecond},
			during: func(_ *Bot, shutdown context.CancelFunc) {
				time.Sleep(1700 * time.Millisecond)
				shutdown()
			},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`1.4s edit $1 "The quick  …"`,
				`1.7s typing false`,
			},
			outcome:   []string{`cancelled shutdown $1`},
			unhandled: true,
		},
		{
			name:      "a before_response hook suppresses the reply: the placeholder goes",
			streaming: false,
			model:     pacedModel{pieces: words, gap: 500 * time.Millisecond},
			hooks: []hooks.Hook{hooks.Handle(hooks.MessageBeforeResponse, "hush", func(_ context.Context, c *hooks.BeforeResponseContext) error {
				c.Draft.Suppress = true
				return nil
			})},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`3s redact $1 suppressed`,
				`3s typing false`,
			},
			outcome: []string{`cancelled suppressed_by_hook $1`},
		},
		{
			name:      "the final edit fails: the placeholder says the answer could not be delivered",
			streaming: false,
			model:     pacedModel{pieces: words, gap: 500 * time.Millisecond},
			fail: func(op accountOp) error {
				if op.Kind == "edit" && !strings.HasPrefix(op.Text, "⚠️") {
					return errBoom
				}
				return nil
			},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`3s edit $1 "⚠️ Sorry, I could not deliver the answer."`,
				`3s typing false`,
			},
			outcome: []string{`cancelled delivery_failed $1`},
		},
		{
			name:      "a turn past its deadline tells the person it took too long",
			streaming: true,
			model:     pacedModel{pieces: []string{"The ", "end"}, gap: 6 * time.Minute},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`6m0.4s edit $1 "The  …"`,
				`10m0s edit $1 "⚠️ Sorry, I could not answer: it took longer than 10m0s."`,
				`10m0s typing false`,
			},
			outcome: []string{`cancelled model_error $1`},
		},
		{
			name:      "a message:claim hook answers: its text is the reply, no model is called",
			streaming: true,
			model:     pacedModel{err: errors.New("the model must not be called")},
			hooks: []hooks.Hook{hooks.Handle(hooks.MessageClaim, "faq", func(_ context.Context, c *hooks.MessageClaimContext) error {
				c.Claimed = &hooks.ClaimResponse{Text: "See the FAQ."}
				return nil
			})},
			transcript: []string{`0s send $1 "See the FAQ."`},
			outcome:    []string{`after_response sent $1 "See the FAQ."`},
		},
		{
			name:      "a reply too long for one message: the placeholder holds its start, the rest follows in the thread",
			streaming: false,
			model:     pacedModel{pieces: []string{longReply[:30000], longReply[30000:60000], longReply[60000:]}, gap: 200 * time.Millisecond},
			transcript: []string{
				`0s typing true`,
				`400ms notice $1 "…"`,
				`600ms edit $1 "All work and no "… (40638 bytes)`,
				`600ms send $3 "work and no play"… (40639 bytes)`,
				`600ms send $4 "and no play. All"… (17723 bytes)`,
				`600ms typing false`,
			},
			outcome: []string{`after_response edited $1 ` + abbrev(longReply)},
			check: func(t *testing.T, acct *fakeAccount) {
				var parts strings.Builder
				for _, op := range acct.ops {
					if op.Kind == "edit" || op.Kind == "send" && !op.Notice {
						parts.WriteString(op.Text)
					}
				}
				if parts.String() != longReply {
					t.Errorf("the parts joined are %d bytes, not the reply's %d", parts.Len(), len(longReply))
				}
			},
		},
		{
			name:      "a replay edits the placeholder its last run recorded",
			streaming: false,
			model:     pacedModel{pieces: words, gap: 100 * time.Millisecond},
			before: func(ctx context.Context, b *Bot, acct *fakeAccount) bool {
				if err := b.track.RecordReply(ctx, turnRoom, turnSource, tracking.Reply{Part: 0, EventID: "$old", Sender: acct.user}); err != nil {
					t.Fatal(err)
				}
				return true
			},
			transcript: []string{
				`0s typing true`,
				`600ms edit $old "The quick brown fox jumps over"`,
				`600ms typing false`,
			},
			outcome: []string{`after_response edited $old "The quick brown fox jumps over"`},
		},
		{
			name:      "a replay finds the placeholder its killed run posted unrecorded, and edits it",
			streaming: false,
			model:     pacedModel{pieces: words, gap: 100 * time.Millisecond},
			before:    killedWhileSending(t, "$posted"),
			transcript: []string{
				`0s typing true`,
				`600ms edit $posted "The quick brown fox jumps over"`,
				`600ms typing false`,
			},
			outcome: []string{`after_response edited $posted "The quick brown fox jumps over"`},
		},
		{
			name:      "a replay removes a copy of the placeholder that landed twice",
			streaming: false,
			model:     pacedModel{pieces: words, gap: 100 * time.Millisecond},
			before:    killedWhileSending(t, "$posted", "$copy"),
			// (The redaction takes a moment, which orders it after the
			// typing notice's end, in the background at the same time.)
			slow: func(op accountOp) time.Duration {
				if op.Kind == "redact" {
					return 10 * time.Millisecond
				}
				return 0
			},
			transcript: []string{
				`0s typing true`,
				`600ms edit $posted "The quick brown fox jumps over"`,
				`600ms typing false`,
				`610ms redact $copy duplicate`,
			},
			outcome: []string{`after_response edited $posted "The quick brown fox jumps over"`},
		},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) { runTurn(t, c) })
	}
}
