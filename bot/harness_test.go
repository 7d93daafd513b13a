package bot

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	hstest.Main(pgtest.Wrap(m))
}

// events records what the hooks of a test bot saw, for assertions.
type events struct {
	mu   sync.Mutex
	seen []string
	cond chan struct{}
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, s)
	if e.cond != nil {
		close(e.cond)
		e.cond = nil
	}
}

func (e *events) list(prefix string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.seen {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// waitFor waits until at least n recorded entries start with prefix.
func (e *events) waitFor(t testing.TB, prefix string, n int, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := e.list(prefix)
		if len(got) >= n {
			return got
		}
		e.mu.Lock()
		if e.cond == nil {
			e.cond = make(chan struct{})
		}
		c := e.cond
		e.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("timed out waiting for %d %q events; got %d: %v", n, prefix, len(got), got)
		}
		select {
		case <-c:
		case <-time.After(left):
		}
	}
}

// recorderPlugin records lifecycle, member and message events.
func (e *events) plugin() hooks.Plugin {
	lifecycle := func(kind string) func(context.Context, *hooks.AgentLifecycleContext) error {
		return func(_ context.Context, c *hooks.AgentLifecycleContext) error {
			e.add(fmt.Sprintf("%s:%s", kind, c.Agent))
			return nil
		}
	}
	return hooks.Plugin{Name: "recorder", Hooks: []hooks.Hook{
		hooks.Handle(hooks.AgentStarted, "started", lifecycle("started")),
		hooks.Handle(hooks.BotReady, "ready", lifecycle("ready")),
		hooks.Handle(hooks.AgentStopped, "stopped", lifecycle("stopped")),
		hooks.Handle(hooks.RoomMemberJoined, "joined", func(_ context.Context, c *hooks.RoomMemberContext) error {
			e.add(fmt.Sprintf("joined:%s:%s", c.RoomID, c.UserID))
			return nil
		}),
		hooks.Handle(hooks.RoomMemberLeft, "left", func(_ context.Context, c *hooks.RoomMemberContext) error {
			e.add(fmt.Sprintf("left:%s:%s", c.RoomID, c.UserID))
			return nil
		}),
		hooks.Handle(hooks.MessageReceived, "received", func(_ context.Context, c *hooks.MessageReceivedContext) error {
			e.add(fmt.Sprintf("msg:%s:%s", c.Envelope.RoomID, c.Envelope.SourceEventID))
			return nil
		}),
		hooks.Handle(hooks.ReactionReceived, "reaction", func(_ context.Context, c *hooks.ReactionReceivedContext) error {
			e.add(fmt.Sprintf("reaction:%s:%s", c.Key, c.TargetEventID))
			return nil
		}),
	}}
}

// testEnv is one test's hookroom setup on the shared homeserver.
type testEnv struct {
	t      testing.TB
	hs     *hstest.Server
	suffix string
	dir    string
	yaml   string
	// logs, when set, also receives the bots' log (JSON lines).
	logs io.Writer
}

func newEnv(t testing.TB) *testEnv {
	hs := hstest.Shared(t)
	return &testEnv{t: t, hs: hs, suffix: strings.ToLower(randomSuffix()), dir: t.TempDir()}
}

func randomSuffix() string { return fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff) }

// localpart returns a per-test unique localpart.
func (e *testEnv) localpart(name string) string { return name + "-" + e.suffix }

func (e *testEnv) userID(name string) id.UserID {
	return id.NewUserID(e.localpart(name), e.hs.ServerName)
}

// configHead is the start of every config.yaml that config writes: data
// and log settings and a matrix section for the shared homeserver, with
// the registration secret as ${HS_SECRET}.
func (e *testEnv) configHead() string {
	return fmt.Sprintf(`data_dir: ./data
log:
  level: debug
matrix:
  homeserver: %s
  server_name: %s
  registration:
    shared_secret: ${HS_SECRET}
  router:
    username: %s
`, e.hs.URL, e.hs.ServerName, e.localpart("router"))
}

// config writes config.yaml with body (the agents/rooms/authorization
// sections) below configHead and loads it with configOptions.
func (e *testEnv) config(body string) *config.Config {
	e.t.Helper()
	text := e.configHead() + body
	if !strings.Contains(body, "models:") {
		text += "models:\n  default:\n    provider: echo\n"
	}
	return e.writeConfig(text)
}

// writeConfig writes text as config.yaml and loads it with configOptions.
func (e *testEnv) writeConfig(text string) *config.Config {
	e.t.Helper()
	path := filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.yaml = path
	cfg, err := config.Load(context.Background(), path, e.configOptions()...)
	if err != nil {
		e.t.Fatalf("config: %v", err)
	}
	return cfg
}

// configOptions are the options config loads config.yaml with: ${HS_SECRET}
// is the shared homeserver's registration secret. A bot that reloads its
// configuration gets them as Options.ConfigOptions.
func (e *testEnv) configOptions() []config.Option {
	return []config.Option{withHSSecret(e.hs.Secret)}
}

// withHSSecret is a config.Option that gives ${HS_SECRET} the value secret
// and leaves every other variable unset.
func withHSSecret(secret string) config.Option {
	return config.WithLookupEnv(func(k string) (string, bool) {
		if k == "HS_SECRET" {
			return secret, true
		}
		return "", false
	})
}

// agentSetup is the config.yaml body most end-to-end tests share: model
// "agent" (provider openai unless Provider says otherwise) on a scripted
// server, rooms, the users authorised everywhere
// (authorization.global_users) and agents in those rooms. body renders it
// for config.
type agentSetup struct {
	LLM       string // base_url of model "agent"
	Provider  string // provider of model "agent"; "openai" when empty
	Model     string // the model's name at the server; "m" when empty
	ModelYAML string // more settings of model "agent", four spaces in
	Models    string // more entries of the models section, two spaces in

	Room  id.RoomID // the one room, "main", when Rooms is empty
	Rooms string    // the entries of the rooms section, two spaces in
	// AgentRooms lists the rooms the agents are in; "main" when empty.
	AgentRooms string
	Admins     []id.UserID // authorization.global_users
	// Top follows authorization.global_users: more authorization settings
	// (two spaces in), then more top-level sections.
	Top string

	Agents    []string // the agents' names (and localparts); "helper" when empty
	AgentYAML string   // more settings of every agent, four spaces in
	// Extra follows the last agent: more agents (two spaces in) and more
	// sections (http, plugins, tool_approval...).
	Extra string
}

// body renders s for e.config, agents' usernames made unique with
// e.localpart.
func (s agentSetup) body(e *testEnv) string {
	var b strings.Builder
	fmt.Fprintf(&b, "models:\n  agent:\n    provider: %s\n    base_url: %s\n    model: %s\n%s%s",
		cmp.Or(s.Provider, "openai"), s.LLM, cmp.Or(s.Model, "m"), s.ModelYAML, s.Models)
	rooms := s.Rooms
	if rooms == "" {
		rooms = fmt.Sprintf("  main:\n    id: %q\n", s.Room)
	}
	admins := make([]string, len(s.Admins))
	for i, u := range s.Admins {
		admins[i] = strconv.Quote(string(u))
	}
	fmt.Fprintf(&b, "rooms:\n%sauthorization:\n  global_users: [%s]\n%sagents:\n", rooms, strings.Join(admins, ", "), s.Top)
	agents := s.Agents
	if len(agents) == 0 {
		agents = []string{"helper"}
	}
	for _, a := range agents {
		fmt.Fprintf(&b, "  %s:\n    username: %s\n    rooms: [%s]\n%s", a, e.localpart(a), cmp.Or(s.AgentRooms, "main"), s.AgentYAML)
	}
	b.WriteString(s.Extra)
	return b.String()
}

// configAgents is config for the body of s.
func (e *testEnv) configAgents(s agentSetup) *config.Config {
	e.t.Helper()
	return e.config(s.body(e))
}

// sendTexts sends n text messages from u into room, text(i) the i-th, one
// after the other, and calls sent with each one's event ID. It reports a
// failed send with t.Errorf and sends no more.
func sendTexts(t testing.TB, u *hstest.User, room id.RoomID, n int, text func(i int) string, sent func(id.EventID)) {
	t.Helper()
	for i := range n {
		resp, err := u.Client.SendText(context.Background(), room, text(i))
		if err != nil {
			t.Errorf("send: %v", err)
			return
		}
		sent(resp.EventID)
	}
}

// roomsByID renders rooms as entries of a rooms section (two spaces in),
// named prefix0, prefix1..., by ID; names is the list of those names for
// a YAML flow sequence ("r0, r1").
func roomsByID(prefix string, rooms []id.RoomID) (entries, names string) {
	var b strings.Builder
	keys := make([]string, len(rooms))
	for i, r := range rooms {
		keys[i] = fmt.Sprintf("%s%d", prefix, i)
		fmt.Fprintf(&b, "  %s:\n    id: %q\n", keys[i], r)
	}
	return b.String(), strings.Join(keys, ", ")
}

// running is a bot started by start.
type running struct {
	bot    *Bot
	cancel context.CancelFunc
	done   chan error
}

// start runs a bot for cfg with the recorder's hooks and waits until every
// account is ready.
func (e *testEnv) start(cfg *config.Config, rec *events, opts Options) *running {
	e.t.Helper()
	return e.startWithin(cfg, rec, opts, 60*time.Second)
}

// startWithin is start waiting up to timeout for the accounts to be ready.
func (e *testEnv) startWithin(cfg *config.Config, rec *events, opts Options, timeout time.Duration) *running {
	e.t.Helper()
	if opts.Registry == nil {
		opts.Registry = func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{rec.plugin()}, hooks.Options{Services: s})
		}
	}
	var out io.Writer = zerolog.NewTestWriter(e.t)
	if e.logs != nil {
		out = zerolog.MultiLevelWriter(out, e.logs)
	}
	before := len(rec.list("ready:"))
	r := e.run(cfg, opts, zerolog.New(out).Level(zerolog.InfoLevel))
	rec.waitFor(e.t, "ready:", before+1+len(cfg.Agents), timeout)
	return r
}

// run creates a bot for cfg that logs to log (with timestamps), runs it
// until the test ends, and returns at once.
func (e *testEnv) run(cfg *config.Config, opts Options, log zerolog.Logger) *running {
	e.t.Helper()
	log = log.With().Timestamp().Logger()
	ctx, cancel := context.WithCancel(log.WithContext(context.Background()))
	b, err := New(ctx, cfg, opts)
	if err != nil {
		cancel()
		e.t.Fatalf("New: %v", err)
	}
	r := &running{bot: b, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- b.Run(ctx) }()
	e.t.Cleanup(func() { r.stop(e.t) })
	return r
}

func (r *running) stop(t testing.TB) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("bot stopped with an error: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("bot did not stop within 30s")
	}
}
