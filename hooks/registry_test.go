package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// recorder collects the names of hooks as they run.
type recorder struct {
	mu  sync.Mutex
	ran []string
}

func (r *recorder) observer(name string, opts ...hooks.Option) hooks.Hook {
	return hooks.Handle(hooks.MessageReceived, name, func(context.Context, *hooks.MessageReceivedContext) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ran = append(r.ran, name)
		return nil
	}, opts...)
}

func (r *recorder) list() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.Join(r.ran, ",")
	r.ran = nil
	return s
}

func ptr[T any](v T) *T { return &v }

func TestOrdering(t *testing.T) {
	var rec recorder
	reg := hooktest.Registry(t, []hooks.Plugin{
		hooktest.Plugin("a", rec.observer("a1"), rec.observer("a2", hooks.Priority(50)), rec.observer("a3", hooks.Priority(-5))),
		hooktest.Plugin("b", rec.observer("b1", hooks.Priority(50)), rec.observer("b2"), rec.observer("b3")),
	})
	hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
	// priority first; ties by plugin order in config, then declaration order
	if got, want := rec.list(), "a3,a2,b1,a1,b2,b3"; got != want {
		t.Errorf("run order %s, want %s", got, want)
	}
	var positions []string
	for _, h := range reg.Hooks() {
		positions = append(positions, h.Hook)
	}
	if got, want := strings.Join(positions, ","), "a3,a2,b1,a1,b2,b3"; got != want {
		t.Errorf("introspection order %s, want %s", got, want)
	}
}

func TestOverrides(t *testing.T) {
	var rec recorder
	tests := []struct {
		name      string
		overrides map[string]hooks.Override
		wantOrder string
		wantInfo  map[string]string // hook -> "priority/timeout/policy"
		warnings  []string
	}{
		{
			name:      "none",
			wantOrder: "first,second,third",
		},
		{
			name:      "disable",
			overrides: map[string]hooks.Override{"second": {Enabled: ptr(false)}},
			wantOrder: "first,third",
		},
		{
			name:      "enabled true keeps the hook",
			overrides: map[string]hooks.Override{"second": {Enabled: ptr(true)}},
			wantOrder: "first,second,third",
		},
		{
			name:      "priority wins over code",
			overrides: map[string]hooks.Override{"third": {Priority: ptr(1)}, "first": {Priority: ptr(500)}},
			wantOrder: "third,second,first",
		},
		{
			name:      "timeout wins over code and event default",
			overrides: map[string]hooks.Override{"first": {Timeout: ptr(42 * time.Millisecond)}, "second": {Timeout: ptr(7 * time.Second)}},
			wantOrder: "first,second,third",
			wantInfo:  map[string]string{"first": "10/42ms", "second": "100/7s", "third": "100/15s"},
		},
		{
			name:      "unknown hook is a warning",
			overrides: map[string]hooks.Override{"fourth": {Priority: ptr(1)}},
			wantOrder: "first,second,third",
			warnings:  []string{`plugin "p": override for hook "fourth" matches no hook the plugin declares`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := hooktest.Plugin("p",
				rec.observer("first", hooks.Priority(10), hooks.Timeout(time.Second)),
				rec.observer("second"),
				rec.observer("third"),
			)
			p.Overrides = tc.overrides
			reg := hooktest.Registry(t, []hooks.Plugin{p})
			hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
			if got := rec.list(); got != tc.wantOrder {
				t.Errorf("order %s, want %s", got, tc.wantOrder)
			}
			for _, h := range reg.Hooks() {
				if want, ok := tc.wantInfo[h.Hook]; ok {
					if got := strconv.Itoa(h.Priority) + "/" + h.Timeout.String(); got != want {
						t.Errorf("%s: %s, want %s", h.Hook, got, want)
					}
				}
			}
			if got := reg.Warnings(); !reflect.DeepEqual(got, tc.warnings) && (len(got) != 0 || len(tc.warnings) != 0) {
				t.Errorf("warnings %q, want %q", got, tc.warnings)
			}
		})
	}
}

func TestFailurePolicyOverride(t *testing.T) {
	gate := hooks.Handle(hooks.ToolBeforeCall, "guard", func(context.Context, *hooks.ToolBeforeCallContext) error {
		return errors.New("policy service down")
	})
	for _, tc := range []struct {
		name     string
		override *hooks.FailurePolicy
		declined bool
	}{
		{"code default is open", nil, false},
		{"config closes it", ptr(hooks.FailClosed), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := hooktest.Plugin("guard", gate)
			if tc.override != nil {
				p.Overrides = map[string]hooks.Override{"guard": {FailurePolicy: tc.override}}
			}
			reg := hooktest.Registry(t, []hooks.Plugin{p})
			c := hooktest.ToolBeforeCall("shell", `{}`)
			hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
			if c.Declined != tc.declined {
				t.Errorf("declined = %v (%q), want %v", c.Declined, c.DeclineReason, tc.declined)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	nop := func(context.Context, *hooks.MessageReceivedContext) error { return nil }
	nopReload := func(context.Context, *hooks.ConfigReloadedContext) error { return nil }
	nopMember := func(context.Context, *hooks.RoomMemberContext) error { return nil }
	nopAny := func(context.Context, hooks.Context) error { return nil }
	tests := []struct {
		name    string
		plugins []hooks.Plugin
		want    string
	}{
		{"duplicate hook name", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.MessageReceived, "x", nop), hooks.Handle(hooks.MessageReceived, "x", nop))},
			`plugin "p", hook "x": duplicate hook name in plugin`},
		{"duplicate plugin name", []hooks.Plugin{hooktest.Plugin("p"), hooktest.Plugin("p")},
			`plugin "p": duplicate plugin name`},
		{"agents filter on an agent-less event", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.ConfigReloaded, "x", nopReload, hooks.Agents("a")))},
			`agents filter can never match: config:reloaded contexts name no agent`},
		{"rooms filter on config:reloaded", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.ConfigReloaded, "x", nopReload, hooks.Rooms("!r:hs")))},
			`rooms filter can never match: config:reloaded contexts name no room`},
		{"agents filter on room:member_joined", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.RoomMemberJoined, "x", nopMember, hooks.Agents("a")))},
			`agents filter can never match: room:member_joined`},
		{"rooms filter with an alias", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.MessageReceived, "x", nop, hooks.Rooms("#lobby:hs")))},
			`rooms filter entry "#lobby:hs" is not a room id`},
		{"closed policy on an observer", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.MessageReceived, "x", nop, hooks.WithFailurePolicy(hooks.FailClosed)))},
			`failure policy closed only applies to gate events`},
		{"invalid custom event", []hooks.Plugin{hooktest.Plugin("p", hooks.HandleAny("Todo:Done", "x", nopAny))},
			`invalid event name "Todo:Done"`},
		{"reserved namespace", []hooks.Plugin{hooktest.Plugin("p", hooks.HandleAny("message:custom", "x", nopAny))},
			`namespace "message" is reserved`},
		{"non-positive timeout", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.MessageReceived, "x", nop, hooks.Timeout(0)))},
			`timeout must be positive`},
		{"non-positive timeout override", []hooks.Plugin{{Name: "p", Hooks: []hooks.Hook{hooks.Handle(hooks.MessageReceived, "x", nop)}, Overrides: map[string]hooks.Override{"x": {Timeout: ptr(time.Duration(0))}}}},
			`override timeout must be positive`},
		{"unnamed hook", []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(hooks.MessageReceived, "", nop))},
			`hook has no name`},
		{"unnamed plugin", []hooks.Plugin{hooktest.Plugin("")},
			`plugin has no name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hooks.NewRegistry(tc.plugins, hooks.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			var le *hooks.LoadError
			if !errors.As(err, &le) {
				t.Errorf("error %v is not a *LoadError", err)
			}
		})
	}
	t.Run("every problem is reported", func(t *testing.T) {
		_, err := hooks.NewRegistry([]hooks.Plugin{
			hooktest.Plugin("p", hooks.Handle(hooks.MessageReceived, "x", nop), hooks.Handle(hooks.MessageReceived, "x", nop)),
			hooktest.Plugin("q", hooks.HandleAny("bad name", "y", nopAny)),
		}, hooks.Options{})
		if err == nil || !strings.Contains(err.Error(), `"p"`) || !strings.Contains(err.Error(), `"q"`) {
			t.Errorf("error %v, want both plugins named", err)
		}
	})
}

func TestFilters(t *testing.T) {
	var rec recorder
	reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p",
		rec.observer("all"),
		rec.observer("code_only", hooks.Agents("code")),
		rec.observer("lobby_only", hooks.Rooms("!lobby:localhost")),
		rec.observer("code_in_lobby", hooks.Agents("code", " "), hooks.Rooms("!lobby:localhost")),
	)})
	for _, tc := range []struct {
		agent hooks.AgentName
		room  id.RoomID
		want  string
	}{
		{"assistant", "!other:localhost", "all"},
		{"code", "!other:localhost", "all,code_only"},
		{"assistant", "!lobby:localhost", "all,lobby_only"},
		{"code", "!lobby:localhost", "all,code_only,lobby_only,code_in_lobby"},
	} {
		c := hooktest.MessageReceived("hi")
		c.Envelope.AgentName, c.Envelope.RoomID = tc.agent, tc.room
		hooktest.Emit(t, reg, hooks.MessageReceived, c)
		if got := rec.list(); got != tc.want {
			t.Errorf("%s in %s ran %s, want %s", tc.agent, tc.room, got, tc.want)
		}
	}
	// The plugin whose message:received hook sent a message is skipped on
	// its re-entry.
	c := hooktest.MessageReceived("hi")
	c.SkipPlugins = []string{"p"}
	hooktest.Emit(t, reg, hooks.MessageReceived, c)
	if got := rec.list(); got != "" {
		t.Errorf("skipped plugin ran %s", got)
	}
}

func TestAllowlist(t *testing.T) {
	var rec recorder
	member := func(name string) hooks.Hook {
		return hooks.Handle(hooks.RoomMemberJoined, name, func(context.Context, *hooks.RoomMemberContext) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.ran = append(rec.ran, name)
			return nil
		})
	}
	reg := hooktest.Registry(t, []hooks.Plugin{
		hooktest.Plugin("audit", rec.observer("audit"), member("audit_member")),
		hooktest.Plugin("geo", rec.observer("geo"), member("geo_member")),
	}, hooks.Options{Allowlist: map[hooks.AgentName][]string{"code": {"audit"}, "locked": {}}})
	for _, tc := range []struct {
		agent hooks.AgentName
		want  string
	}{
		{"assistant", "audit,geo"}, // no allowlist entry: every plugin
		{"code", "audit"},
		{"locked", ""}, // an empty allowlist allows nothing
	} {
		c := hooktest.MessageReceived("hi")
		c.Envelope.AgentName = tc.agent
		hooktest.Emit(t, reg, hooks.MessageReceived, c)
		if got := rec.list(); got != tc.want {
			t.Errorf("agent %s ran %q, want %q", tc.agent, got, tc.want)
		}
	}
	// Events that name no agent are not restricted.
	hooktest.Emit(t, reg, hooks.RoomMemberJoined, hooktest.MemberJoined("@bob:localhost"))
	if got := rec.list(); got != "audit_member,geo_member" {
		t.Errorf("member hooks ran %q", got)
	}
}

func TestValidateEventName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"message:received", true},
		{"tool:before_call", true},
		{"todo:item_completed", true},
		{"a:b:c", true},
		{"my-plugin.v2:done_1", true},
		{"todo", false},
		{"Todo:done", false},
		{"todo:", false},
		{":done", false},
		{"todo::done", false},
		{"todo:do ne", false},
		{"message:custom", false},
		{"room:whatever", false},
		{"tool:custom", false},
		{"", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := hooks.ValidateEventName(tc.name); (err == nil) != tc.ok {
				t.Errorf("ValidateEventName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
			}
		})
	}
	if _, err := hooks.NewCustomEvent("message:received"); err == nil {
		t.Error("NewCustomEvent accepted a built-in event name")
	}
}

func TestCustomEvents(t *testing.T) {
	done := hooks.MustCustomEvent("todo:item_completed")
	var got struct {
		ItemID string `json:"item_id"`
	}
	var source string
	var room id.RoomID
	reg := hooktest.Registry(t, []hooks.Plugin{
		hooktest.Plugin("todo", hooks.Handle(hooks.MessageReceived, "complete", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
			return c.Emit(ctx, "todo:item_completed", map[string]string{"item_id": "123"})
		})),
		hooktest.Plugin("audit", hooks.Handle(done, "record", func(_ context.Context, c *hooks.CustomEventContext) error {
			source, room = c.SourcePlugin, c.RoomID
			return c.DecodePayload(&got)
		})),
	})
	if !reg.Has("todo:item_completed") || reg.Has("todo:other") {
		t.Fatal("Has is wrong for custom events")
	}
	hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("done"))
	if got.ItemID != "123" || source != "todo" || room != hooktest.Room {
		t.Errorf("custom hook saw item %q from %q in %q", got.ItemID, source, room)
	}
	// Emitting a custom event directly (as tools do) works too.
	got.ItemID = ""
	hooktest.Emit(t, reg, done, hooktest.Custom(map[string]string{"item_id": "7"}))
	if got.ItemID != "7" {
		t.Errorf("direct emission: item %q", got.ItemID)
	}
	// An invalid name is an error for the emitting hook.
	var emitErr error
	reg2 := hooktest.NewRegistry(t, hooks.Handle(hooks.MessageReceived, "bad", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
		emitErr = c.Emit(ctx, "message:fake", nil)
		return nil
	}))
	hooktest.Emit(t, reg2, hooks.MessageReceived, hooktest.MessageReceived("x"))
	if emitErr == nil || !strings.Contains(emitErr.Error(), "reserved") {
		t.Errorf("emitting a reserved name: %v", emitErr)
	}
}

func TestRecursionLimit(t *testing.T) {
	again := hooks.MustCustomEvent("loop:again")
	var mu sync.Mutex
	var depths []int
	var errs []error
	reg := hooktest.NewRegistry(t,
		hooks.Handle(again, "reemit", func(ctx context.Context, c *hooks.CustomEventContext) error {
			mu.Lock()
			depths = append(depths, hooks.Depth(ctx))
			mu.Unlock()
			err := c.Emit(ctx, "loop:again", nil)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return nil
		}),
		hooks.Handle(hooks.ToolBeforeCall, "gate_emits", func(ctx context.Context, c *hooks.ToolBeforeCallContext) error {
			return c.Emit(ctx, "loop:again", nil)
		}),
	)
	hooktest.Emit(t, reg, again, hooktest.Custom(nil))
	if want := []int{1, 2, 3}; !reflect.DeepEqual(depths, want) {
		t.Errorf("hooks ran at depths %v, want %v", depths, want)
	}
	if len(errs) != 3 || !errors.Is(errs[0], hooks.ErrRecursionLimit) || errs[1] != nil || errs[2] != nil {
		t.Errorf("nested emit errors %v, want the innermost to hit the limit", errs)
	}
	// The depth carries across modes: a chain started by a gate counts too.
	depths = nil
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, hooktest.ToolBeforeCall("x", "{}"))
	if want := []int{2, 3}; !reflect.DeepEqual(depths, want) {
		t.Errorf("from a gate: depths %v, want %v", depths, want)
	}
	// And across Matrix round trips: a message a hook sent comes back at depth 3.
	ctx := hooks.WithDepth(context.Background(), 3)
	if err := hooks.Emit(ctx, reg, again, hooktest.Custom(nil)); !errors.Is(err, hooks.ErrRecursionLimit) {
		t.Errorf("emit at depth 3: %v, want ErrRecursionLimit", err)
	}
	// The limit is configurable.
	reg5 := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(again, "reemit", func(ctx context.Context, c *hooks.CustomEventContext) error {
		mu.Lock()
		depths = append(depths, hooks.Depth(ctx))
		mu.Unlock()
		_ = c.Emit(ctx, "loop:again", nil)
		return nil
	}))}, hooks.Options{MaxDepth: 5})
	depths = nil
	hooktest.Emit(t, reg5, again, hooktest.Custom(nil))
	if len(depths) != 5 {
		t.Errorf("with MaxDepth 5: %d nested runs, want 5", len(depths))
	}
}

func TestSwapWhileEmitting(t *testing.T) {
	var live hooks.Live
	started := make(chan struct{})
	release := make(chan struct{})
	var rec recorder
	old := hooktest.NewRegistry(t,
		hooks.Handle(hooks.MessageReceived, "old_first", func(context.Context, *hooks.MessageReceivedContext) error {
			close(started)
			<-release
			return nil
		}),
		rec.observer("old_second"),
	)
	live.Store(old)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hooktest.Emit(t, live.Load(), hooks.MessageReceived, hooktest.MessageReceived("in flight"))
	}()
	<-started
	next := hooktest.NewRegistry(t, rec.observer("new_only"))
	if prev := live.Swap(next); prev != old {
		t.Error("Swap did not return the previous registry")
	}
	hooktest.Emit(t, live.Load(), hooks.MessageReceived, hooktest.MessageReceived("after swap"))
	if got := rec.list(); got != "new_only" {
		t.Errorf("new emission ran %q", got)
	}
	close(release)
	<-done
	if got := rec.list(); got != "old_second" {
		t.Errorf("in-flight emission ran %q, want it to finish on its snapshot", got)
	}
}

func TestWithoutAndStatsCarryOver(t *testing.T) {
	var rec recorder
	reg := hooktest.Registry(t, []hooks.Plugin{
		hooktest.Plugin("keep", rec.observer("k")),
		hooktest.Plugin("drop", rec.observer("d")),
	})
	hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
	rec.list()
	smaller, err := reg.Without("drop")
	if err != nil {
		t.Fatal(err)
	}
	hooktest.Emit(t, smaller, hooks.MessageReceived, hooktest.MessageReceived("hi"))
	if got := rec.list(); got != "k" {
		t.Errorf("after Without: ran %q", got)
	}
	if got := smaller.Plugins(); !reflect.DeepEqual(got, []string{"keep"}) {
		t.Errorf("plugins %v", got)
	}
	stats := smaller.Stats()
	if len(stats) != 1 || stats[0].Invocations != 2 {
		t.Errorf("stats %+v, want 2 invocations carried over", stats)
	}
	// The original snapshot is unchanged.
	hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
	if got := rec.list(); got != "k,d" {
		t.Errorf("original registry ran %q", got)
	}
}

func TestIntrospection(t *testing.T) {
	reg := hooktest.Registry(t, []hooks.Plugin{{
		Name: "guard", Source: "builtin:guard",
		Hooks: []hooks.Hook{
			hooks.Handle(hooks.ToolBeforeCall, "deny", func(context.Context, *hooks.ToolBeforeCallContext) error { return nil },
				hooks.Priority(5), hooks.Agents("code"), hooks.Rooms("!r:hs"), hooks.WithFailurePolicy(hooks.FailClosed)),
			hooks.Handle(hooks.MessageReceived, "log", func(context.Context, *hooks.MessageReceivedContext) error { return nil }),
		},
	}})
	got := reg.Hooks()
	want := []hooks.HookInfo{
		{Event: "message:received", Mode: "observer", Plugin: "guard", Source: "builtin:guard", Hook: "log", Priority: 100, Timeout: 15 * time.Second, FailurePolicy: "open", Position: 1},
		{Event: "tool:before_call", Mode: "gate", Plugin: "guard", Source: "builtin:guard", Hook: "deny", Priority: 5, Timeout: 200 * time.Millisecond,
			Agents: []hooks.AgentName{"code"}, Rooms: []id.RoomID{"!r:hs"}, FailurePolicy: "closed", Position: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Hooks() =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Errorf("HookInfo does not marshal: %v", err)
	}
}

func TestHostServicesAndSettings(t *testing.T) {
	var svc hooktest.Services
	stateRoot := filepath.Join(t.TempDir(), "plugins", "geo")
	settings, err := hooks.NewSettings(map[string]any{"url": "http://geo.local", "retries": 3, "tags": []any{"a", 1, "b"}, "on": true})
	if err != nil {
		t.Fatal(err)
	}
	var sawRoot string
	var sawSettings struct {
		URL     string `json:"url"`
		Retries int    `json:"retries"`
	}
	reg := hooktest.Registry(t, []hooks.Plugin{{
		Name: "geo", Settings: settings, StateRoot: stateRoot,
		Hooks: []hooks.Hook{hooks.Handle(hooks.MessageReceived, "reply", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
			s := c.Settings()
			if s.String("url") != "http://geo.local" || s.Int("retries") != 3 || !s.Bool("on") || strings.Join(s.Strings("tags"), ",") != "a,b" {
				t.Errorf("settings getters wrong: %v %v %v %v", s.String("url"), s.Int("retries"), s.Bool("on"), s.Strings("tags"))
			}
			if err := s.Decode(&sawSettings); err != nil {
				return err
			}
			root, err := c.StateRoot()
			if err != nil {
				return err
			}
			sawRoot = root
			if c.PluginName() != "geo" || c.HookName() != "reply" || c.EventName() != "message:received" {
				t.Errorf("binding: %s/%s/%s", c.PluginName(), c.HookName(), c.EventName())
			}
			if _, err := c.PutRoomState(ctx, c.Envelope.RoomID, "com.example.geo", "", map[string]string{"city": "Paris"}); err != nil {
				return err
			}
			raw, err := c.RoomStateEvent(ctx, c.Envelope.RoomID, "com.example.geo", "")
			if err != nil || string(raw) != `{"city":"Paris"}` {
				t.Errorf("room state read back %s, %v", raw, err)
			}
			if _, err := c.RoomStateEvent(ctx, c.Envelope.RoomID, "com.example.none", ""); !errors.Is(err, hooks.ErrNotFound) {
				t.Errorf("missing state: %v", err)
			}
			if c.Admin() != nil {
				t.Error("admin bound without a service")
			}
			_, err = c.SendMessage(ctx, c.Envelope.RoomID, "You are in Paris", &hooks.SendOptions{ThreadID: "$t", TriggerDispatch: true})
			return err
		})},
	}}, hooks.Options{Services: svc.Bind()})
	hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("where am I"))
	if sawRoot != stateRoot || sawSettings.URL != "http://geo.local" || sawSettings.Retries != 3 {
		t.Errorf("state root %q settings %+v", sawRoot, sawSettings)
	}
	if fi, err := os.Stat(stateRoot); err != nil || !fi.IsDir() {
		t.Errorf("state root not created: %v", err)
	}
	want := []hooks.HookMessage{{
		RoomID: hooktest.Room, ThreadID: "$t", Text: "You are in Paris", TriggerDispatch: true,
		Plugin: "geo", Event: "message:received", Agent: hooktest.Agent, OriginalSender: hooktest.Sender, Depth: 1,
	}}
	if got := svc.Sent(); !reflect.DeepEqual(got, want) {
		t.Errorf("sent %+v, want %+v", got, want)
	}
	// Without services, helpers say so instead of failing silently.
	var sendErr error
	bare := hooktest.NewRegistry(t, hooks.Handle(hooks.MessageReceived, "send", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
		_, sendErr = c.SendMessage(ctx, c.Envelope.RoomID, "x", nil)
		return nil
	}))
	hooktest.Emit(t, bare, hooks.MessageReceived, hooktest.MessageReceived("x"))
	if !errors.Is(sendErr, hooks.ErrNoService) {
		t.Errorf("send without a sender: %v", sendErr)
	}
}

func TestHandleAny(t *testing.T) {
	var seen []string
	reg := hooktest.NewRegistry(t,
		hooks.HandleAny("message:received", "any_received", func(_ context.Context, c hooks.Context) error {
			mr := c.(*hooks.MessageReceivedContext)
			seen = append(seen, "received:"+mr.Envelope.Body)
			mr.Suppress = true
			return nil
		}),
		hooks.HandleAny("todo:done", "any_custom", func(_ context.Context, c hooks.Context) error {
			seen = append(seen, "custom:"+string(c.(*hooks.CustomEventContext).Payload))
			return nil
		}),
	)
	c := hooktest.MessageReceived("hi")
	hooktest.Emit(t, reg, hooks.MessageReceived, c)
	hooktest.Emit(t, reg, hooks.MustCustomEvent("todo:done"), hooktest.Custom(1))
	if !c.Suppress || strings.Join(seen, " ") != "received:hi custom:1" {
		t.Errorf("suppress %v seen %v", c.Suppress, seen)
	}
}

func TestEmitWithoutHooks(t *testing.T) {
	c := hooktest.MessageReceived("hi")
	if err := hooks.Emit(context.Background(), nil, hooks.MessageReceived, c); err != nil {
		t.Errorf("nil registry: %v", err)
	}
	reg := hooktest.NewRegistry(t)
	if err := hooks.Emit(context.Background(), reg, hooks.MessageReceived, c); err != nil || c.CorrelationID != "" {
		t.Errorf("empty registry: %v, correlation id %q", err, c.CorrelationID)
	}
	if reg.Has("message:received") {
		t.Error("Has on empty registry")
	}
}
