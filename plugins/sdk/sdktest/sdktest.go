package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/plugins"
)

// Harness is an SDK's test plugin loaded in one mode: the registry it is
// registered in, the fake services behind it and the log of the host.
type Harness struct {
	// Ctx is the emissions' context; it carries a logger writing to Logs.
	Ctx context.Context
	// Logs is what the host (and, through it, the plugin) logged; the
	// test prints it when it fails.
	Logs *testkit.Buffer
	// Svc serves the plugin's host calls: messages, room state and
	// attachments.
	Svc *hooktest.Services
	// Reg is the registry the plugin is registered in (Register).
	Reg *hooks.Registry
	// Plugin is the test plugin's name: the source of the events its tools
	// emit (EmitCustom) and the sender of its messages.
	Plugin string
	// StateDir is the plugin's state directory.
	StateDir string
	// CallTool runs the plugin's tool name with call: its arguments, who
	// called it, where, and Emit for the events the tool emits.
	CallTool func(name string, call plugins.ToolCall) (string, error)
}

// NewHarness returns the harness of the test plugin named plugin, with an
// empty log, services and state directory; the caller starts the plugin,
// sets CallTool and calls Register.
func NewHarness(t *testing.T, plugin string) *Harness {
	t.Helper()
	logs := &testkit.Buffer{}
	logger := zerolog.New(logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &Harness{
		Ctx: logger.WithContext(context.Background()), Logs: logs, Svc: &hooktest.Services{},
		Plugin: plugin, StateDir: t.TempDir(),
	}
}

// Register sets h.Reg to a registry of p alone, served by h.Svc.
func (h *Harness) Register(t *testing.T, p hooks.Plugin) {
	t.Helper()
	h.Reg = hooktest.Registry(t, []hooks.Plugin{p}, hooks.Options{Services: h.Svc.Bind()})
}

// Stats returns the statistics of h's hook named hook (zero when there is
// none).
func (h *Harness) Stats(hook string) hooks.HookStats {
	for _, s := range h.Reg.Stats() {
		if s.Hook == hook {
			return s
		}
	}
	return hooks.HookStats{}
}

// EmitCustom emits the custom event named event with payload in h.Reg, as
// h.Plugin: it serves a tool call's Emit.
func (h *Harness) EmitCustom(ctx context.Context, event string, payload any) error {
	ev, err := hooks.NewCustomEvent(event)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	return hooks.Emit(ctx, h.Reg, ev, &hooks.CustomEventContext{Payload: raw, SourcePlugin: h.Plugin})
}

// Emit emits c in h's registry with h's context, failing the test on error.
func Emit[T any, P hooks.ContextOf[T]](t *testing.T, h *Harness, ev hooks.Event[T], c P) {
	t.Helper()
	emit(t, h.Ctx, h.Reg, ev, c)
}

// emit emits c in reg, failing the test on error.
func emit[T any, P hooks.ContextOf[T]](t *testing.T, ctx context.Context, reg *hooks.Registry, ev hooks.Event[T], c P) {
	t.Helper()
	if err := hooks.Emit(ctx, reg, ev, c); err != nil {
		t.Fatalf("emit %s: %v", ev.Name(), err)
	}
}

// Declared is what an SDK's test plugin declares beyond the hooks they all
// declare alike.
type Declared struct {
	// Hooks is how many hooks the plugin has.
	Hooks int
	// GuardTimeout is the declared timeout of its "guard" gate.
	GuardTimeout time.Duration
}

// RunShared runs, as subtests of t, the checks every SDK's test plugin
// passes once registered in h (with the settings footer "\n-- sent by
// hookroom" and home "Berlin"): it declares want's hooks with its
// options; its observer suppresses spam; its collectors add the user's
// location (stable) and the target agent (volatile); its transformers
// append the footer (keeping the draft's extra fields) and shout the
// final response; its "guard" gate declines reading secret.txt and,
// failing on unreadable arguments, fails closed; its claim answers "ping"
// with "pong"; its schedule hook rewrites a fired task's text; its
// failing hook is counted and logged; its slow hook times out after its
// declared 100 ms.
func RunShared(t *testing.T, h *Harness, want Declared) {
	t.Run("declaration", func(t *testing.T) {
		infos := map[string]hooks.HookInfo{}
		for _, i := range h.Reg.Hooks() {
			infos[i.Hook] = i
		}
		if len(infos) != want.Hooks || infos["location"].Priority != 20 || infos["guard"].FailurePolicy != "closed" ||
			infos["guard"].Timeout != want.GuardTimeout || !slices.Equal(infos["sched"].Rooms, []id.RoomID{hooktest.Room}) ||
			!slices.Equal(infos["callbacks"].Agents, []hooks.AgentName{hooktest.Agent}) {
			t.Errorf("declaration = %+v, want %d hooks", infos, want.Hooks)
		}
	})
	t.Run("observer", func(t *testing.T) {
		c := hooktest.MessageReceived("cheap spam")
		Emit(t, h, hooks.MessageReceived, c)
		if !c.Suppress {
			t.Error("not suppressed")
		}
	})
	t.Run("collectors", func(t *testing.T) {
		c := hooktest.MessageEnrich("hi")
		Emit(t, h, hooks.MessageEnrich, c)
		if want := []hooks.EnrichmentItem{{Key: "location", Text: "User is at Berlin", CachePolicy: hooks.Stable}}; !slices.Equal(c.Items, want) {
			t.Errorf("items = %+v", c.Items)
		}
		s := hooktest.SystemEnrich("hi")
		Emit(t, h, hooks.SystemEnrich, s)
		if want := []hooks.EnrichmentItem{{Key: "agent", Text: "You are assistant", CachePolicy: hooks.Volatile}}; !slices.Equal(s.Items, want) {
			t.Errorf("items = %+v", s.Items)
		}
	})
	t.Run("transformers", func(t *testing.T) {
		c := hooktest.BeforeResponse("Hello")
		c.Draft.Extra = json.RawMessage(`{"k":1}`)
		Emit(t, h, hooks.MessageBeforeResponse, c)
		if c.Draft.Text != "Hello\n-- sent by hookroom" || string(c.Draft.Extra) != `{"k":1}` {
			t.Errorf("draft = %+v", c.Draft)
		}
		f := hooktest.FinalResponse("done")
		Emit(t, h, hooks.MessageFinalResponseTransform, f)
		if f.Draft.Text != "DONE" {
			t.Errorf("final = %q", f.Draft.Text)
		}
	})
	t.Run("gate", func(t *testing.T) {
		c := hooktest.ToolBeforeCall("read_file", `{"path":"secret.txt"}`)
		Emit(t, h, hooks.ToolBeforeCall, c)
		if !c.Declined || c.DeclineReason != "secrets stay unread" {
			t.Errorf("declined=%v reason=%q", c.Declined, c.DeclineReason)
		}
		// Unreadable arguments make the guard fail; it fails closed.
		c = hooktest.ToolBeforeCall("read_file", `[1]`)
		Emit(t, h, hooks.ToolBeforeCall, c)
		if !c.Declined || !strings.Contains(c.DeclineReason, "was unavailable (failed)") {
			t.Errorf("declined=%v reason=%q", c.Declined, c.DeclineReason)
		}
	})
	t.Run("claim", func(t *testing.T) {
		c := hooktest.MessageClaim("ping")
		Emit(t, h, hooks.MessageClaim, c)
		if c.Claimed == nil || c.Claimed.Text != "pong" {
			t.Errorf("claimed = %+v", c.Claimed)
		}
	})
	t.Run("schedule", func(t *testing.T) {
		c := &hooks.ScheduleFiredContext{TaskID: "t", RoomID: hooktest.Room, MessageText: "standup"}
		Emit(t, h, hooks.ScheduleFired, c)
		if c.MessageText != "rewritten: standup" {
			t.Errorf("message_text = %q", c.MessageText)
		}
	})
	t.Run("failing hook", func(t *testing.T) {
		Emit(t, h, hooks.MessageCancelled, hooktest.Cancelled(hooks.CancelModelError))
		if s := h.Stats("fails"); s.Errors != 1 {
			t.Errorf("stats = %+v", s)
		}
		h.Logs.WaitFor(t, "calendar API is down", 3*time.Second)
	})
	t.Run("deadline", func(t *testing.T) {
		start := time.Now()
		Emit(t, h, hooks.RoomMemberJoined, hooktest.MemberJoined("@bob:localhost"))
		if d := time.Since(start); d > 250*time.Millisecond {
			t.Errorf("emit took %v with a 100 ms hook", d)
		}
		if s := h.Stats("slow"); s.Timeouts != 1 {
			t.Errorf("stats = %+v", s)
		}
	})
}

// CheckCallbacks emits c (a message:after_response for the test agent)
// to the test plugin's "callbacks" hook, which uses every context helper,
// and fails t unless the hook ran without failing, wrote wantReport to
// callbacks.txt in its state directory, sent "reply was: " and the reply
// text, then (through the custom event it emitted) "emitted from hook",
// both as h.Plugin, and logged "callbacks done" with the hook's and the
// event's name.
func CheckCallbacks(t *testing.T, h *Harness, c *hooks.AfterResponseContext, wantReport string) {
	t.Helper()
	Emit(t, h, hooks.MessageAfterResponse, c)
	if s := h.Stats("callbacks"); s.Errors+s.Timeouts+s.Panics > 0 {
		t.Fatalf("callbacks hook failed: %+v", s)
	}
	report, err := os.ReadFile(filepath.Join(h.StateDir, "callbacks.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(report) != wantReport {
		t.Errorf("report = %q, want %q", report, wantReport)
	}
	var texts []string
	for _, m := range h.Svc.Sent() {
		texts = append(texts, m.Text)
		if m.Plugin != h.Plugin {
			t.Errorf("message %q sent as plugin %q", m.Text, m.Plugin)
		}
	}
	if want := []string{"reply was: " + c.Result.Text, "emitted from hook"}; !slices.Equal(texts, want) {
		t.Errorf("sent %q, want %q", texts, want)
	}
	h.Logs.WaitFor(t, `"hook":"callbacks","event":"message:after_response"`, 3*time.Second)
	h.Logs.WaitFor(t, "callbacks done", 3*time.Second)
}

// CheckTools fails t unless the test plugin's tools answer through
// h.CallTool: "add" adds, "whoami" names the call's agent, room, thread,
// requester, session and correlation id, and "announce" emits the custom
// event whose hook sends "emitted from tool".
func CheckTools(t *testing.T, h *Harness) {
	t.Helper()
	out, err := h.CallTool("add", plugins.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`{"a":2,"b":40}`)}})
	if err != nil || out != "42" {
		t.Errorf("add = %q, %v", out, err)
	}
	out, err = h.CallTool("whoami", plugins.ToolCall{ToolCall: hooks.ToolCall{
		Agent: hooktest.Agent, RoomID: hooktest.Room, ThreadID: hooktest.EventID,
		RequesterID: hooktest.Sender, SessionID: "session-1",
	}, CorrelationID: "corr-1"})
	if want := fmt.Sprintf("%s %s %s %s session-1 corr-1", hooktest.Agent, hooktest.Room, hooktest.EventID, hooktest.Sender); err != nil || out != want {
		t.Errorf("whoami = %q, %v; want %q", out, err, want)
	}
	before := len(h.Svc.Sent())
	out, err = h.CallTool("announce", plugins.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`{}`)}, Emit: h.EmitCustom})
	if err != nil || out != "announced" {
		t.Errorf("announce = %q, %v", out, err)
	}
	if sent := h.Svc.Sent(); len(sent) != before+1 || sent[before].Text != "emitted from tool" {
		t.Errorf("sent = %+v", sent)
	}
}

// Only returns the hook named name of hs (as a one-hook slice), for a
// registry that benchmarks it alone. It fails tb when there is none.
func Only(tb testing.TB, hs []hooks.Hook, name string) []hooks.Hook {
	tb.Helper()
	i := slices.IndexFunc(hs, func(h hooks.Hook) bool { return h.Name() == name })
	if i < 0 {
		tb.Fatalf("no hook %q", name)
	}
	return hs[i : i+1]
}

// BenchEmit emits message:before_response with the draft "Hello" in reg
// b.N times (b.Loop), failing b unless each emission turns the draft into
// want and the registry's first hook never failed, and reports the median
// and 99th percentile of the emissions (ReportPercentiles).
func BenchEmit(b *testing.B, reg *hooks.Registry, want string) {
	b.Helper()
	ctx := context.Background()
	var samples []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		c := &hooks.BeforeResponseContext{Draft: hooks.ResponseDraft{Text: "Hello", Kind: hooks.ResponseAI, Envelope: hooks.Envelope{
			RoomID: "!room:localhost", Body: "hi", AgentName: "assistant", RequesterID: "@alice:localhost", SenderID: "@alice:localhost",
		}}}
		c.CorrelationID = "bench"
		start := time.Now()
		if err := hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
		if c.Draft.Text != want {
			b.Fatalf("draft = %q", c.Draft.Text)
		}
	}
	if s := reg.Stats(); s[0].Errors+s[0].Timeouts+s[0].Panics > 0 {
		b.Fatalf("hook failures during the benchmark: %+v", s[0])
	}
	ReportPercentiles(b, samples)
}

// ReportPercentiles adds the p50-µs and p99-µs metrics of samples (sorted
// in place) to b.
func ReportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// CheckTeam runs, as subtests of t, the checks of the test plugin's hooks
// on a team's turn (hooktest.Team, coordinate, asking alice and carol of
// alice, bob and carol): its "team_rules" collector tells the team's
// leader whom it asks and a member who it is; its "team_sign" transformer
// signs the final text of a streamed reply of kind team (after "shout")
// with the team and the members it asked; its
// "subagent_start" and "subagent_end" observers log each member run.
func CheckTeam(t *testing.T, h *Harness) {
	team := hooktest.Team(hooks.TeamCoordinate, "alice", "bob", "carol")
	team.TargetMembers = []hooks.AgentName{"alice", "carol"}
	env := hooktest.Envelope("compare the two papers")
	env.AgentName, env.Team = hooktest.TeamName, team
	t.Run("enrichment", func(t *testing.T) {
		s := &hooks.SystemEnrichContext{Envelope: env, TargetAgent: hooktest.TeamName, TargetMembers: team.TargetMembers}
		Emit(t, h, hooks.SystemEnrich, s)
		want := []hooks.EnrichmentItem{
			{Key: "agent", Text: "You are research", CachePolicy: hooks.Volatile},
			{Key: "team", Text: "You lead research (coordinate) asking alice, carol", CachePolicy: hooks.Volatile},
		}
		if !slices.Equal(s.Items, want) {
			t.Errorf("team's items = %+v", s.Items)
		}
		member := *team
		member.Member = "carol"
		m := &hooks.SystemEnrichContext{Envelope: env, TargetAgent: "carol"}
		m.Envelope.Team = &member
		Emit(t, h, hooks.SystemEnrich, m)
		want = []hooks.EnrichmentItem{
			{Key: "agent", Text: "You are carol", CachePolicy: hooks.Volatile},
			{Key: "team", Text: "You answer as carol, a member of research", CachePolicy: hooks.Volatile},
		}
		if !slices.Equal(m.Items, want) {
			t.Errorf("member's items = %+v", m.Items)
		}
	})
	t.Run("response kind", func(t *testing.T) {
		c := &hooks.FinalResponseContext{Draft: hooks.FinalDraft{Text: "Both agree.", Kind: hooks.ResponseTeam, Envelope: env}}
		Emit(t, h, hooks.MessageFinalResponseTransform, c)
		if want := "BOTH AGREE.\n-- research: alice, carol"; c.Draft.Text != want || c.Draft.Kind != hooks.ResponseTeam {
			t.Errorf("draft %q (%s), want %q", c.Draft.Text, c.Draft.Kind, want)
		}
	})
	t.Run("sub-agents", func(t *testing.T) {
		Emit(t, h, hooks.SubagentSpawned, hooktest.SubagentSpawned("alice", "find the sources"))
		h.Logs.WaitFor(t, "sub-agent alice of research spawned (team_member, depth 1): find the sources", 3*time.Second)
		Emit(t, h, hooks.SubagentEnded, hooktest.SubagentEnded("alice", "find the sources", hooks.SubagentOK))
		h.Logs.WaitFor(t, "sub-agent alice ended ok after 1.5s: 240 tokens, run $event:localhost/research/alice/answer", 3*time.Second)
		Emit(t, h, hooks.SubagentEnded, hooktest.SubagentEnded("carol", "check the numbers", hooks.SubagentKilled))
		h.Logs.WaitFor(t, "sub-agent carol ended killed after 1.5s: 0 tokens, run $event:localhost/research/carol/answer", 3*time.Second)
	})
}
