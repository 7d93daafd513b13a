package sdk_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
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
	"github.com/hookroom/hookroom/plugins/process"
	"github.com/hookroom/hookroom/plugins/process/protocol"
	"github.com/hookroom/hookroom/plugins/sdk"
	"github.com/hookroom/hookroom/plugins/sdk/sdktest"
)

// With HOOKROOM_SDK_TEST set, the test binary is testPlugin served as a
// process plugin.
func TestMain(m *testing.M) {
	if os.Getenv("HOOKROOM_SDK_TEST") != "" {
		sdk.Main(testPlugin)
	}
	os.Exit(m.Run())
}

var emittedEvent = hooks.MustCustomEvent("sdktest:emitted")

// testPlugin has a hook for every mode, hooks that use every context helper,
// hooks that fail and panic, and two tools. The same value runs built in
// and as a process.
var testPlugin = sdk.Plugin{
	Name:    "sdk-test",
	Version: "1.2.3",
	Setup: func(_ context.Context, env plugins.Env) error {
		if env.Settings.String("footer") == "" {
			return errors.New("the footer setting is required")
		}
		env.Logger.Info().Msg("set up")
		return nil
	},
	Hooks: []hooks.Hook{
		hooks.Handle(hooks.MessageReceived, "suppress_spam", func(_ context.Context, c *hooks.MessageReceivedContext) error {
			fmt.Println("stray output from plugin code:", c.Envelope.Body)
			c.Suppress = strings.Contains(c.Envelope.Body, "spam")
			return nil
		}),
		hooks.Handle(hooks.MessageEnrich, "location", func(_ context.Context, c *hooks.MessageEnrichContext) error {
			c.AddMetadata("location", "User is at "+c.Settings().String("home"), hooks.StableItem)
			return nil
		}, hooks.Priority(20)),
		hooks.Handle(hooks.SystemEnrich, "tags", func(_ context.Context, c *hooks.SystemEnrichContext) error {
			c.AddInstruction("agent", "You are "+string(c.TargetAgent))
			return nil
		}),
		hooks.Handle(hooks.MessageBeforeResponse, "footer", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.Text += c.Settings().String("footer")
			return nil
		}),
		hooks.Handle(hooks.MessageFinalResponseTransform, "shout", func(_ context.Context, c *hooks.FinalResponseContext) error {
			c.Draft.Text = strings.ToUpper(c.Draft.Text)
			return nil
		}),
		hooks.Handle(hooks.ToolBeforeCall, "guard", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
			var args struct{ Path string }
			if err := c.DecodeArguments(&args); err != nil {
				return err
			}
			if strings.Contains(args.Path, "secret") {
				c.Decline("secrets stay unread")
			}
			if strings.HasPrefix(args.Path, "/prod/") {
				c.RequireApproval("production files")
			}
			return nil
		}, hooks.WithFailurePolicy(hooks.FailClosed), hooks.Timeout(5*time.Second)), // a declared timeout, long enough for a loaded machine
		hooks.Handle(hooks.ToolApprovalRequested, "auto", func(_ context.Context, c *hooks.ToolApprovalRequestedContext) error {
			if c.Tool == "read_file" {
				c.Deny("no reading in production")
			}
			return nil
		}),
		hooks.Handle(hooks.MessageClaim, "ping", func(_ context.Context, c *hooks.MessageClaimContext) error {
			if c.Envelope.Body == "ping" {
				c.Claim("pong")
			}
			return nil
		}),
		hooks.Handle(hooks.ScheduleFired, "sched", func(_ context.Context, c *hooks.ScheduleFiredContext) error {
			c.MessageText = "rewritten: " + c.MessageText
			return nil
		}, hooks.Rooms(hooktest.Room)),
		// callbacks makes a dozen host calls (a process reads an
		// attachment in chunks): the default 3 s is too short on a loaded
		// machine, and the test waits for it to finish anyway.
		hooks.Handle(hooks.MessageAfterResponse, "callbacks", callbacks, hooks.Agents(hooktest.Agent), hooks.Timeout(30*time.Second)),
		hooks.Handle(emittedEvent, "emitted", func(ctx context.Context, c *hooks.CustomEventContext) error {
			var p struct{ From string }
			if err := c.DecodePayload(&p); err != nil {
				return err
			}
			_, err := c.SendMessage(ctx, hooktest.Room, "emitted from "+p.From, nil)
			return err
		}),
		hooks.Handle(hooks.MessageCancelled, "fails", func(context.Context, *hooks.CancelledContext) error {
			return errors.New("calendar API is down")
		}),
		hooks.Handle(hooks.ReactionReceived, "panics", func(context.Context, *hooks.ReactionReceivedContext) error {
			panic("reaction handler exploded")
		}),
		hooks.Handle(hooks.RoomMemberJoined, "slow", func(ctx context.Context, c *hooks.RoomMemberContext) error {
			<-ctx.Done()
			return ctx.Err()
		}, hooks.Timeout(100*time.Millisecond)),
	},
	Tools: []plugins.Tool{
		{
			Name: "add", Description: "adds two numbers",
			Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`),
			Func: func(_ context.Context, call plugins.ToolCall) (string, error) {
				var args struct{ A, B float64 }
				if err := call.DecodeArguments(&args); err != nil {
					return "", err
				}
				return fmt.Sprint(args.A + args.B), nil
			},
		},
		{
			Name: "whoami", Description: "answers with who called it, where, in which turn",
			Func: func(_ context.Context, call plugins.ToolCall) (string, error) {
				return fmt.Sprintf("%s %s %s %s %s %s", call.Agent, call.RoomID, call.ThreadID, call.RequesterID, call.SessionID, call.CorrelationID), nil
			},
		},
		{
			Name: "announce", Description: "emits sdktest:emitted",
			Func: func(ctx context.Context, call plugins.ToolCall) (string, error) {
				if err := call.EmitEvent(ctx, "sdktest:emitted", map[string]string{"from": "tool"}); err != nil {
					return "", err
				}
				return "announced", nil
			},
		},
	},
}

// callbacks uses every context helper.
func callbacks(ctx context.Context, c *hooks.AfterResponseContext) error {
	log := c.Logger()
	room := c.Result.Envelope.RoomID
	if _, err := c.SendMessage(ctx, room, "reply was: "+c.Result.Text, &hooks.SendOptions{ThreadID: c.Result.Envelope.ResolvedThreadID}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if _, err := c.PutRoomState(ctx, room, "org.example.count", "", map[string]int{"n": 1}); err != nil {
		return fmt.Errorf("put state: %w", err)
	}
	content, err := c.RoomStateEvent(ctx, room, "org.example.count", "")
	if err != nil {
		return fmt.Errorf("get state: %w", err)
	}
	all, err := c.RoomStateEvents(ctx, room, "org.example.count")
	if err != nil {
		return fmt.Errorf("list state: %w", err)
	}
	if _, err := c.RoomStateEvent(ctx, room, "org.example.missing", ""); !errors.Is(err, hooks.ErrNotFound) {
		return fmt.Errorf("missing state: err = %v, want hooks.ErrNotFound", err)
	}
	if err := c.Emit(ctx, "sdktest:emitted", map[string]string{"from": "hook"}); err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	dir, err := c.StateRoot()
	if err != nil {
		return err
	}
	var atts []string
	for _, attID := range c.Result.Envelope.AttachmentIDs {
		att, err := c.Attachment(ctx, attID)
		if err != nil {
			return fmt.Errorf("attachment: %w", err)
		}
		atts = append(atts, fmt.Sprintf("%s:%s:%d:%x", att.Name, att.MimeType, att.Size, sha256.Sum256(att.Data)))
	}
	if _, err := c.Attachment(ctx, "mxc://localhost/not-mine"); !errors.Is(err, hooks.ErrNotFound) {
		return fmt.Errorf("foreign attachment: err = %v, want hooks.ErrNotFound", err)
	}
	report := fmt.Sprintf("state=%s all=%d plugin=%s hook=%s event=%s atts=%s", content, len(all), c.PluginName(), c.HookName(), c.EventName(), strings.Join(atts, ","))
	if err := os.WriteFile(filepath.Join(dir, "callbacks.txt"), []byte(report), 0o600); err != nil {
		return err
	}
	log.Info().Str("report", report).Msg("callbacks done")
	return nil
}

type logBuffer = testkit.Buffer

// harness is the test plugin loaded in one mode.
type harness struct {
	ctx      context.Context
	logs     *logBuffer
	reg      *hooks.Registry
	svc      *hooktest.Services
	stateDir string
	callTool func(name string, args string) (string, error)
	// callToolAs runs a tool with call's agent, room, thread, requester,
	// session and correlation id (its Emit is ignored).
	callToolAs func(name string, call plugins.ToolCall) (string, error)
}

var testSettings = map[string]any{"footer": "\n-- sent by hookroom", "home": "Berlin"}

func (h *harness) emitToRegistry(ctx context.Context, event string, payload any) error {
	ev, err := hooks.NewCustomEvent(event)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(payload)
	c := &hooks.CustomEventContext{Payload: raw, SourcePlugin: "sdk-test"}
	return hooks.Emit(ctx, h.reg, ev, c)
}

func newHarness(t *testing.T, mode string) *harness {
	t.Helper()
	logs := &logBuffer{}
	logger := zerolog.New(logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	h := &harness{ctx: logger.WithContext(context.Background()), logs: logs, svc: &hooktest.Services{}, stateDir: t.TempDir()}
	settings, err := hooks.NewSettings(testSettings)
	if err != nil {
		t.Fatal(err)
	}
	var hp hooks.Plugin
	switch mode {
	case "builtin":
		inst, err := testPlugin.Builtin().New(h.ctx, plugins.Env{Name: "sdk-test", Settings: settings, StateDir: h.stateDir, Logger: &logger})
		if err != nil {
			t.Fatal(err)
		}
		hp = hooks.Plugin{Name: "sdk-test", Hooks: inst.Hooks(), Settings: settings, StateRoot: h.stateDir}
		tools := inst.(plugins.ToolProvider).Tools()
		h.callTool = func(name, args string) (string, error) {
			i := slices.IndexFunc(tools, func(t plugins.Tool) bool { return t.Name == name })
			return tools[i].Call(h.ctx, plugins.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(args)}, Emit: h.emitToRegistry})
		}
		h.callToolAs = func(name string, call plugins.ToolCall) (string, error) {
			i := slices.IndexFunc(tools, func(t plugins.Tool) bool { return t.Name == name })
			return tools[i].Call(h.ctx, call)
		}
	case "process":
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		p, err := process.Start(h.ctx, process.Spec{
			Name: "sdk-test", Command: []string{exe}, Env: []string{"HOOKROOM_SDK_TEST=1"},
			StateDir: h.stateDir, Settings: settings,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		hp = p.RegistryPlugin("test")
		h.callTool = func(name, args string) (string, error) {
			return p.CallTool(h.ctx, name, process.ToolCallRequest{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(args)}, Emit: h.emitToRegistry})
		}
		h.callToolAs = func(name string, call plugins.ToolCall) (string, error) {
			return p.CallTool(h.ctx, name, process.ToolCallRequest{ToolCall: call.ToolCall, CorrelationID: call.CorrelationID})
		}
	}
	h.reg = hooktest.Registry(t, []hooks.Plugin{hp}, hooks.Options{Services: h.svc.Bind()})
	return h
}

func emit[T any, P hooks.ContextOf[T]](t *testing.T, h *harness, ev hooks.Event[T], c P) {
	t.Helper()
	if err := hooks.Emit(h.ctx, h.reg, ev, c); err != nil {
		t.Fatalf("emit %s: %v", ev.Name(), err)
	}
}

func stats(h *harness, hook string) hooks.HookStats {
	for _, s := range h.reg.Stats() {
		if s.Hook == hook {
			return s
		}
	}
	return hooks.HookStats{}
}

// The same plugin code behaves the same built in and as a process.
func TestSameCodeBothModes(t *testing.T) {
	for _, mode := range []string{"builtin", "process"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, mode)
			t.Run("declaration", func(t *testing.T) {
				infos := map[string]hooks.HookInfo{}
				for _, i := range h.reg.Hooks() {
					infos[i.Hook] = i
				}
				if infos["location"].Priority != 20 || infos["guard"].FailurePolicy != "closed" ||
					infos["guard"].Timeout != 5*time.Second || !slices.Equal(infos["sched"].Rooms, []id.RoomID{hooktest.Room}) ||
					!slices.Equal(infos["callbacks"].Agents, []hooks.AgentName{hooktest.Agent}) || len(infos) != 14 {
					t.Errorf("declaration = %+v", infos)
				}
			})
			t.Run("observer", func(t *testing.T) {
				c := hooktest.MessageReceived("cheap spam")
				emit(t, h, hooks.MessageReceived, c)
				if !c.Suppress {
					t.Error("not suppressed")
				}
			})
			t.Run("collectors", func(t *testing.T) {
				c := hooktest.MessageEnrich("hi")
				emit(t, h, hooks.MessageEnrich, c)
				if want := []hooks.EnrichmentItem{{Key: "location", Text: "User is at Berlin", CachePolicy: hooks.Stable}}; !slices.Equal(c.Items, want) {
					t.Errorf("items = %+v", c.Items)
				}
				s := hooktest.SystemEnrich("hi")
				emit(t, h, hooks.SystemEnrich, s)
				if len(s.Items) != 1 || s.Items[0].Text != "You are assistant" {
					t.Errorf("items = %+v", s.Items)
				}
			})
			t.Run("transformers", func(t *testing.T) {
				c := hooktest.BeforeResponse("Hello")
				emit(t, h, hooks.MessageBeforeResponse, c)
				if c.Draft.Text != "Hello\n-- sent by hookroom" {
					t.Errorf("draft = %q", c.Draft.Text)
				}
				f := hooktest.FinalResponse("done")
				emit(t, h, hooks.MessageFinalResponseTransform, f)
				if f.Draft.Text != "DONE" {
					t.Errorf("final = %q", f.Draft.Text)
				}
			})
			sdktest.RunShared(t, h.ctx, h.reg) // gate, claim, schedule
			t.Run("gate approval", func(t *testing.T) {
				c := hooktest.ToolBeforeCall("read_file", `{"path":"/prod/x"}`)
				emit(t, h, hooks.ToolBeforeCall, c)
				if c.Declined || !c.ApprovalRequired || c.ApprovalReason != "production files" {
					t.Errorf("declined=%v approval=%v reason=%q", c.Declined, c.ApprovalRequired, c.ApprovalReason)
				}
				a := hooktest.ToolApprovalRequested("read_file", `{"path":"/prod/x"}`)
				emit(t, h, hooks.ToolApprovalRequested, a)
				if a.Decision != hooks.ApprovalDeny || a.DecisionReason != "no reading in production" {
					t.Errorf("decision=%q reason=%q", a.Decision, a.DecisionReason)
				}
			})
			t.Run("context helpers", func(t *testing.T) {
				// Larger than one host.attachment.get answer: a process reads it in chunks.
				big := make([]byte, protocol.MaxAttachmentChunk+1234)
				for i := range big {
					big[i] = byte(i * 7 % 251)
				}
				h.svc.AddAttachment(hooktest.Room, hooktest.EventID, hooks.Attachment{ID: "mxc://localhost/big", Kind: "file", Name: "big.bin", MimeType: "application/octet-stream", Data: big})
				h.svc.AddAttachment(hooktest.Room, "$other:localhost", hooks.Attachment{ID: "mxc://localhost/not-mine", Kind: "file", Name: "x", Data: []byte("x")})
				c := hooktest.AfterResponse("42")
				c.Result.Envelope.AttachmentIDs = []string{"mxc://localhost/big"}
				emit(t, h, hooks.MessageAfterResponse, c)
				if s := stats(h, "callbacks"); s.Errors+s.Timeouts+s.Panics > 0 {
					t.Fatalf("callbacks hook failed: %+v", s)
				}
				report, err := os.ReadFile(filepath.Join(h.stateDir, "callbacks.txt"))
				if err != nil {
					t.Fatal(err)
				}
				wantAtt := fmt.Sprintf("big.bin:application/octet-stream:%d:%x", len(big), sha256.Sum256(big))
				if want := `state={"n":1} all=1 plugin=sdk-test hook=callbacks event=message:after_response atts=` + wantAtt; string(report) != want {
					t.Errorf("report = %q, want %q", report, want)
				}
				var texts []string
				for _, m := range h.svc.Sent() {
					texts = append(texts, m.Text)
					if m.Plugin != "sdk-test" {
						t.Errorf("message %q sent as plugin %q", m.Text, m.Plugin)
					}
				}
				if want := []string{"reply was: 42", "emitted from hook"}; !slices.Equal(texts, want) {
					t.Errorf("sent %q, want %q", texts, want)
				}
				h.logs.WaitFor(t, "callbacks done", 3*time.Second)
			})
			t.Run("tools", func(t *testing.T) {
				out, err := h.callTool("add", `{"a":2,"b":40}`)
				if err != nil || out != "42" {
					t.Errorf("add = %q, %v", out, err)
				}
				out, err = h.callToolAs("whoami", plugins.ToolCall{ToolCall: hooks.ToolCall{
					Agent: hooktest.Agent, RoomID: hooktest.Room, ThreadID: hooktest.EventID,
					RequesterID: hooktest.Sender, SessionID: "session-1",
				}, CorrelationID: "corr-1"})
				if want := fmt.Sprintf("%s %s %s %s session-1 corr-1", hooktest.Agent, hooktest.Room, hooktest.EventID, hooktest.Sender); err != nil || out != want {
					t.Errorf("whoami = %q, %v; want %q", out, err, want)
				}
				before := len(h.svc.Sent())
				out, err = h.callTool("announce", `{}`)
				if err != nil || out != "announced" {
					t.Errorf("announce = %q, %v", out, err)
				}
				if sent := h.svc.Sent(); len(sent) != before+1 || sent[before].Text != "emitted from tool" {
					t.Errorf("sent = %+v", sent)
				}
				if _, err := h.callTool("add", `"nope"`); err == nil || !strings.Contains(err.Error(), "failed to decode tool arguments") {
					t.Errorf("add with bad arguments: err = %v", err)
				}
			})
			t.Run("failing hook", func(t *testing.T) {
				emit(t, h, hooks.MessageCancelled, hooktest.Cancelled(hooks.CancelModelError))
				if s := stats(h, "fails"); s.Errors != 1 {
					t.Errorf("stats = %+v", s)
				}
				h.logs.WaitFor(t, "calendar API is down", 3*time.Second)
			})
			t.Run("panicking hook", func(t *testing.T) {
				c := &hooks.ReactionReceivedContext{RoomID: hooktest.Room, Key: "👍", Agent: hooktest.Agent}
				emit(t, h, hooks.ReactionReceived, c)
				s := stats(h, "panics")
				if s.Errors+s.Panics != 1 {
					t.Errorf("stats = %+v", s)
				}
				h.logs.WaitFor(t, "reaction handler exploded", 3*time.Second)
			})
			t.Run("deadline", func(t *testing.T) {
				start := time.Now()
				emit(t, h, hooks.RoomMemberJoined, hooktest.MemberJoined("@bob:localhost"))
				if d := time.Since(start); d > 250*time.Millisecond {
					t.Errorf("emit took %v with a 100ms hook", d)
				}
				if s := stats(h, "slow"); s.Timeouts != 1 {
					t.Errorf("stats = %+v", s)
				}
			})
		})
	}
}

func TestSetupErrorFailsStart(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, err = process.Start(context.Background(), process.Spec{
		Name: "sdk-test", Command: []string{exe}, Env: []string{"HOOKROOM_SDK_TEST=1"}, StateDir: t.TempDir(),
	})
	if err == nil || !strings.Contains(err.Error(), "setup failed: the footer setting is required") {
		t.Fatalf("err = %v", err)
	}
	_, err = testPlugin.Builtin().New(context.Background(), plugins.Env{Name: "sdk-test"})
	if err == nil || !strings.Contains(err.Error(), "the footer setting is required") {
		t.Fatalf("builtin: err = %v", err)
	}
}

// A stray fmt.Println in plugin code goes to stderr, not into the protocol.
func TestServeRedirectsStdout(t *testing.T) {
	h := newHarness(t, "process")
	c := hooktest.MessageReceived("spam")
	emit(t, h, hooks.MessageReceived, c)
	h.logs.WaitFor(t, "stray output from plugin code: spam", 3*time.Second)
	if strings.Contains(h.logs.String(), "skipping a line") || !c.Suppress {
		t.Error("the plugin wrote garbage into the protocol stream")
	}
}
