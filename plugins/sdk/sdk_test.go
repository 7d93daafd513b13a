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

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
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
		hooks.Handle(hooks.PluginBeforeInstall, "install_policy", func(_ context.Context, c *hooks.PluginInstallContext) error {
			if c.SourceType == hooks.PluginSourceGit && !strings.HasPrefix(c.Source, "https://git.example.org/") {
				c.Decline(c.Name + " " + c.Version + ": plugins come from git.example.org only")
			}
			return nil
		}, hooks.WithFailurePolicy(hooks.FailClosed), hooks.Timeout(5*time.Second)),
		hooks.Handle(hooks.ModelResolve, "route", func(_ context.Context, c *hooks.ModelResolveContext) error {
			if c.Requested == "" && strings.Contains(c.Text, "hard") {
				c.Model = "smart"
			}
			return nil
		}),
		hooks.Handle(hooks.ModelRequest, "redact", func(_ context.Context, c *hooks.ModelRequestContext) error {
			c.ReplaceText("hunter2", "[secret]")
			c.RemoveTool("shell")
			if c.Round > 3 {
				c.Refuse("too many rounds for " + c.Model)
			}
			return nil
		}),
		hooks.Handle(hooks.ModelResponse, "meter", func(_ context.Context, c *hooks.ModelResponseContext) error {
			c.Logger().Info().Msgf("metered round %d of %s: %d tokens in %s", c.Round, c.Model, c.Usage.TotalTokens, c.Latency)
			return nil
		}),
		hooks.Handle(hooks.ToolResult, "mask", func(_ context.Context, c *hooks.ToolResultContext) error {
			c.Content = strings.ReplaceAll(c.Content, "AKIA1234", "AKIA****")
			return nil
		}),
		hooks.Handle(hooks.MemoryExtracted, "memories", func(_ context.Context, c *hooks.MemoryExtractedContext) error {
			c.Drop(func(m hooks.ExtractedMemory) bool { return strings.Contains(m.Text, "password") })
			for i := range c.Memories {
				c.Memories[i].Text = strings.ReplaceAll(c.Memories[i].Text, "Alice", "A.")
				if strings.Contains(c.Memories[i].Text, "veto") {
					c.Veto("asked to")
				}
			}
			return nil
		}),
		hooks.Handle(hooks.UsageBudgetReached, "budget_alert", func(_ context.Context, c *hooks.BudgetReachedContext) error {
			c.Logger().Info().Msgf("budget alert: %s %s at %.0f%% (%d of %d on %s)", c.Scope, c.Subject, c.Threshold*100, c.Used, c.Limit, c.Day)
			return nil
		}),
		hooks.Handle(hooks.SystemEnrich, "team_rules", func(_ context.Context, c *hooks.SystemEnrichContext) error {
			switch team := c.Envelope.Team; {
			case team == nil:
			case team.Member != "":
				c.AddInstruction("team", "You answer as "+string(team.Member)+", a member of "+string(team.Name))
			default:
				c.AddInstruction("team", fmt.Sprintf("You lead %s (%s) asking %s", team.Name, team.Mode, names(c.TargetMembers)))
			}
			return nil
		}),
		hooks.Handle(hooks.MessageFinalResponseTransform, "team_sign", func(_ context.Context, c *hooks.FinalResponseContext) error {
			if c.Draft.Kind == hooks.ResponseTeam && c.Draft.Envelope.Team != nil {
				c.Draft.Text += "\n-- " + string(c.Draft.Envelope.Team.Name) + ": " + names(c.Draft.Envelope.Team.TargetMembers)
			}
			return nil
		}),
		hooks.Handle(hooks.SubagentSpawned, "subagent_start", func(_ context.Context, c *hooks.SubagentContext) error {
			c.Logger().Info().Msgf("sub-agent %s of %s spawned (%s, depth %d): %s", c.AgentID, c.Parent, c.Reason, c.SpawnDepth, c.Task)
			return nil
		}),
		hooks.Handle(hooks.SubagentEnded, "subagent_end", func(_ context.Context, c *hooks.SubagentContext) error {
			c.Logger().Info().Msgf("sub-agent %s ended %s after %s: %d tokens, run %s", c.AgentID, c.Outcome, c.Duration, c.Usage.TotalTokens, c.RunID)
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

var testSettings = map[string]any{"footer": "\n-- sent by hookroom", "home": "Berlin"}

// newHarness loads testPlugin in mode: "builtin" or "process" (this test
// binary, serving it through sdk.Main).
func newHarness(t *testing.T, mode string) *sdktest.Harness {
	t.Helper()
	h := sdktest.NewHarness(t, "sdk-test")
	settings, err := hooks.NewSettings(testSettings)
	if err != nil {
		t.Fatal(err)
	}
	var hp hooks.Plugin
	switch mode {
	case "builtin":
		inst, err := testPlugin.Builtin().New(h.Ctx, plugins.Env{Name: "sdk-test", Settings: settings, StateDir: h.StateDir, Logger: zerolog.Ctx(h.Ctx)})
		if err != nil {
			t.Fatal(err)
		}
		hp = hooks.Plugin{Name: "sdk-test", Hooks: inst.Hooks(), Settings: settings, StateRoot: h.StateDir}
		tools := inst.(plugins.ToolProvider).Tools()
		h.CallTool = func(name string, call plugins.ToolCall) (string, error) {
			i := slices.IndexFunc(tools, func(t plugins.Tool) bool { return t.Name == name })
			if i < 0 {
				return "", fmt.Errorf("no tool %q", name)
			}
			return tools[i].Call(h.Ctx, call)
		}
	case "process":
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		p, err := process.Start(h.Ctx, process.Spec{
			Name: "sdk-test", Command: []string{exe}, Env: []string{"HOOKROOM_SDK_TEST=1"},
			StateDir: h.StateDir, Settings: settings,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		hp = p.RegistryPlugin("test")
		h.CallTool = func(name string, call plugins.ToolCall) (string, error) {
			return p.CallTool(h.Ctx, name, call)
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	h.Register(t, hp)
	return h
}

// The same plugin code behaves the same built in and as a process; the
// checks the Python SDK's test plugin passes too are sdktest's.
func TestSameCodeBothModes(t *testing.T) {
	for _, mode := range []string{"builtin", "process"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, mode)
			sdktest.RunShared(t, h, sdktest.Declared{Hooks: 25, GuardTimeout: 5 * time.Second})
			t.Run("team", func(t *testing.T) { sdktest.CheckTeam(t, h) })
			t.Run("gate approval", func(t *testing.T) {
				c := hooktest.ToolBeforeCall("read_file", `{"path":"/prod/x"}`)
				sdktest.Emit(t, h, hooks.ToolBeforeCall, c)
				if c.Declined || !c.ApprovalRequired || c.ApprovalReason != "production files" {
					t.Errorf("declined=%v approval=%v reason=%q", c.Declined, c.ApprovalRequired, c.ApprovalReason)
				}
				a := hooktest.ToolApprovalRequested("read_file", `{"path":"/prod/x"}`)
				sdktest.Emit(t, h, hooks.ToolApprovalRequested, a)
				if a.Decision != hooks.ApprovalDeny || a.DecisionReason != "no reading in production" {
					t.Errorf("decision=%q reason=%q", a.Decision, a.DecisionReason)
				}
			})
			t.Run("install gate", func(t *testing.T) {
				c := hooktest.PluginInstall("geo", "1.2.0")
				c.Source, c.SourceType = "https://evil.example/geo.git", hooks.PluginSourceGit
				sdktest.Emit(t, h, hooks.PluginBeforeInstall, c)
				if !c.Declined || c.DeclineReason != "geo 1.2.0: plugins come from git.example.org only" {
					t.Errorf("declined=%v reason=%q", c.Declined, c.DeclineReason)
				}
				c = hooktest.PluginInstall("geo", "1.2.0")
				sdktest.Emit(t, h, hooks.PluginBeforeInstall, c)
				if c.Declined {
					t.Errorf("a local directory was declined: %q", c.DeclineReason)
				}
			})
			t.Run("model events", func(t *testing.T) {
				r := hooktest.ModelResolve("a hard question", "default", "default", "smart")
				sdktest.Emit(t, h, hooks.ModelResolve, r)
				if r.Model != "smart" {
					t.Errorf("model:resolve chose %q", r.Model)
				}
				r = hooktest.ModelResolve("a hard question", "default", "default", "smart")
				r.Requested, r.Source, r.Model = "default", hooks.ModelFromThread, "default"
				sdktest.Emit(t, h, hooks.ModelResolve, r)
				if r.Model != "default" {
					t.Errorf("model:resolve overrode the thread's choice: %q", r.Model)
				}
				q := hooktest.ModelRequest("my password is hunter2", "shell", "clock")
				sdktest.Emit(t, h, hooks.ModelRequest, q)
				if q.Messages[1].Content != "my password is [secret]" || len(q.Messages) != 2 || len(q.Tools) != 1 || q.Tools[0].Name != "clock" || q.Refused {
					t.Errorf("model:request = %+v", q)
				}
				q = hooktest.ModelRequest("hi", "clock")
				q.Round = 4
				sdktest.Emit(t, h, hooks.ModelRequest, q)
				if !q.Refused || q.RefuseReason != "too many rounds for default" || len(q.Tools) != 1 {
					t.Errorf("model:request refusal = %+v", q)
				}
				tr := hooktest.ToolResult("env", "", "key=AKIA1234")
				sdktest.Emit(t, h, hooks.ToolResult, tr)
				if tr.Content != "key=AKIA****" {
					t.Errorf("tool:result = %q", tr.Content)
				}
				checkMemoryExtracted(t, h)
				sdktest.Emit(t, h, hooks.ModelResponse, hooktest.ModelResponse("hello"))
				h.Logs.WaitFor(t, "metered round 1 of default: 15 tokens in 250ms", 3*time.Second)
				sdktest.Emit(t, h, hooks.UsageBudgetReached, hooktest.BudgetReached(hooks.BudgetPerson, 1000, 812, 0.8))
				h.Logs.WaitFor(t, "budget alert: person @alice:localhost at 80% (812 of 1000 on 2026-01-02)", 3*time.Second)
			})
			t.Run("context helpers", func(t *testing.T) {
				// Larger than one host.attachment.get answer: a process reads it in chunks.
				big := make([]byte, protocol.MaxAttachmentChunk+1234)
				for i := range big {
					big[i] = byte(i * 7 % 251)
				}
				h.Svc.AddAttachment(hooktest.Room, hooktest.EventID, hooks.Attachment{ID: "mxc://localhost/big", Kind: "file", Name: "big.bin", MimeType: "application/octet-stream", Data: big})
				h.Svc.AddAttachment(hooktest.Room, "$other:localhost", hooks.Attachment{ID: "mxc://localhost/not-mine", Kind: "file", Name: "x", Data: []byte("x")})
				c := hooktest.AfterResponse("42")
				c.Result.Envelope.AttachmentIDs = []string{"mxc://localhost/big"}
				wantAtt := fmt.Sprintf("big.bin:application/octet-stream:%d:%x", len(big), sha256.Sum256(big))
				sdktest.CheckCallbacks(t, h, c, `state={"n":1} all=1 plugin=sdk-test hook=callbacks event=message:after_response atts=`+wantAtt)
			})
			t.Run("tools", func(t *testing.T) {
				sdktest.CheckTools(t, h)
				if _, err := h.CallTool("add", plugins.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`"nope"`)}}); err == nil || !strings.Contains(err.Error(), "failed to decode tool arguments") {
					t.Errorf("add with bad arguments: err = %v", err)
				}
			})
			t.Run("panicking hook", func(t *testing.T) {
				c := &hooks.ReactionReceivedContext{RoomID: hooktest.Room, Key: "👍", Agent: hooktest.Agent}
				sdktest.Emit(t, h, hooks.ReactionReceived, c)
				if s := h.Stats("panics"); s.Errors+s.Panics != 1 {
					t.Errorf("stats = %+v", s)
				}
				h.Logs.WaitFor(t, "reaction handler exploded", 3*time.Second)
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
	sdktest.Emit(t, h, hooks.MessageReceived, c)
	h.Logs.WaitFor(t, "stray output from plugin code: spam", 3*time.Second)
	if strings.Contains(h.Logs.String(), "skipping a line") || !c.Suppress {
		t.Error("the plugin wrote garbage into the protocol stream")
	}
}

// names joins agent names with ", ".
func names(ns []hooks.AgentName) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// checkMemoryExtracted: the test plugin's memory:extracted hook drops the
// memory about a password, edits the other, and vetoes on request.
func checkMemoryExtracted(t *testing.T, h *sdktest.Harness) {
	t.Helper()
	m := hooktest.MemoryExtracted("Alice has a cat.", "Alice's password is hunter2.")
	sdktest.Emit(t, h, hooks.MemoryExtracted, m)
	if len(m.Memories) != 1 || m.Memories[0].Text != "A. has a cat." || m.Memories[0].Person != hooktest.Sender || m.Vetoed {
		t.Errorf("memory:extracted = %+v", m)
	}
	m = hooktest.MemoryExtracted("Alice said: veto this.")
	sdktest.Emit(t, h, hooks.MemoryExtracted, m)
	if !m.Vetoed || m.VetoReason != "asked to" {
		t.Errorf("memory:extracted veto = %+v", m)
	}
}
